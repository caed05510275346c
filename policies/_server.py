"""The vLLM servers a resource starts, read from every place a resource can start one.

One reading for every policy: Cloud Run v2 services, jobs and worker pools, Cloud Run v1
services (container command + args, or the image's own entrypoint), and startup scripts in
instance/TPU metadata. The command lines are read by :mod:`serving.vllm_argv`; this module
finds them in the resource's inputs and notes what it could not read (a value unknown at
preview, a script it cannot split, a command it does not understand), which the mandatory
`vllm-server-readable` policy reports.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from policies._k8s import unreadable
from policies._resources import (
    CLOUD_RUN_WORKLOADS,
    VllmServer,
    accelerator,
    containers,
    find_hardware,
    get,
    is_list,
    items,
    read_field,
)
from serving.vllm_argv import (
    ReadError,
    find_launches,
    is_vllm_image,
    looks_like_vllm_args,
    mentions_vllm,
    parse_serve_args,
    runs_non_serving_program,
    script_launches,
)


@dataclass
class Reading:
    """What a resource starts: its vLLM servers, and what could not be read."""

    servers: list[VllmServer] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _strings_or_unknown(value: Any) -> tuple[list[str], bool]:
    """Elements of a string list, and whether any part of it is unknown (preview)."""
    if value is None:
        return [], False
    if not is_list(value):
        return [], True
    out: list[str] = []
    unknown = False
    for index in range(len(value)):
        try:
            item = value[index]
        except UnknownValueError:
            unknown = True
            continue
        if isinstance(item, str):
            out.append(item)
        else:
            unknown = True
    return out, unknown


def _holds_gpu(container: Any, only_container_of_gpu_workload: bool) -> bool:
    """The container the accelerator is attached to (an nvidia.com/gpu or google.com/tpu
    limit, or the only one)."""
    return (
        bool(get(container, "resources", "limits", "nvidia.com/gpu"))
        or bool(get(container, "resources", "limits", "google.com/tpu"))
        or only_container_of_gpu_workload
    )


def _literal_envs(container: Any) -> dict[str, str]:
    """The container's environment variables with literal values (a shell expands them)."""
    found: dict[str, str] = {}
    raw, _ = read_field(container, "envs")
    for env in items(raw):
        name, _ = read_field(env, "name")
        value, _ = read_field(env, "value")
        if isinstance(name, str) and isinstance(value, str):
            found[name] = value
    return found


def vllm_servers(resource_type: str, props: Mapping[str, Any]) -> list[VllmServer]:
    """Every vLLM server a resource starts, with the options in effect."""
    return read_servers(resource_type, props).servers


def read_servers(resource_type: str, props: Mapping[str, Any]) -> Reading:
    gpu = accelerator(resource_type, props)
    hardware = find_hardware(gpu)
    reading = Reading()

    def add(argv: list[str], env: dict[str, str], image: str | None, where: str) -> None:
        parsed = parse_serve_args(argv, env)
        for problem in parsed.problems:
            reading.problems.append(f"{where}: {problem}")
        reading.servers.append(
            VllmServer(
                resource_type=resource_type,
                args=parsed.as_dict(),
                accelerator=gpu,
                hardware=hardware,
                image=image,
                where=where,
                env=parsed.env,
            )
        )

    reading.problems += unreadable(resource_type, props)
    all_containers = containers(resource_type, props)
    for index, container in enumerate(all_containers):
        name = get(container, "name") or f"#{index}"
        where = f"container {name!r}"
        raw_commands, commands_unknown = read_field(container, "commands")
        raw_args, args_unknown = read_field(container, "args")
        commands, c_unknown = _strings_or_unknown(raw_commands)
        args, a_unknown = _strings_or_unknown(raw_args)
        image_value, _ = read_field(container, "image")
        image = image_value if isinstance(image_value, str) else None
        holds_gpu = _holds_gpu(container, gpu is not None and len(all_containers) == 1)
        known_vllm_image = image is not None and is_vllm_image(image)
        might_run_vllm = holds_gpu or known_vllm_image or mentions_vllm(commands + args)
        if commands_unknown or c_unknown or args_unknown or a_unknown:
            if might_run_vllm:
                what = "command" if commands_unknown or c_unknown else "args"
                reading.problems.append(
                    f"{where}: its {what} are not known (a value unknown at "
                    "preview); the vLLM options cannot be checked"
                )
            continue
        argv = [*commands, *args]
        # No command: the image's entrypoint runs. A vLLM image, or an image the reader does
        # not know that is given vLLM's options, is read as `vllm serve`.
        runs_vllm = not commands and (
            (image is not None and is_vllm_image(image)) or looks_like_vllm_args(args)
        )
        try:
            container_env = _literal_envs(container)
            launches = find_launches(argv, image_runs_vllm=runs_vllm, env=container_env)
        except ReadError as exc:
            reading.problems.append(f"{where}: {exc}")
            continue
        if not launches and (
            holds_gpu or (known_vllm_image and not runs_non_serving_program(argv))
        ):
            # A GPU container, or one in a vLLM image (other than a model download with
            # `hf`), that starts no vLLM server the reader can see: its server, if any, is
            # started where the policies cannot look.
            why = "holds the GPU" if holds_gpu else f"runs a vLLM image ({image})"
            if not commands and not args:
                shown = image or "an image not known at preview"
                reading.problems.append(
                    f"{where} {why} and runs its image's own entrypoint ({shown}), which "
                    "the policies cannot see; give the command and arguments explicitly"
                )
            else:
                reading.problems.append(
                    f"{where} {why} but no vLLM server was found in its command "
                    f"{shlex.join(argv)!r} (a script or program the policies cannot see "
                    "into); give the `vllm serve` command and arguments explicitly"
                )
        for launch in launches:
            # The container's own env is judged where it is declared (envs), not again here.
            own = {k: v for k, v in launch.env.items() if container_env.get(k) != v}
            add(launch.argv, own, image, where)
    scripts = startup_scripts(props, reading)
    found = False
    for key, script in scripts:
        where = f"startup script ({key})"
        try:
            launches = script_launches(script)
        except ReadError as exc:
            reading.problems.append(f"{where}: {exc}")
            found = True
            continue
        found = found or bool(launches)
        for launch in launches:
            add(launch.argv, launch.env, launch.image, where)
    if scripts and not found and gpu is not None and resource_type not in CLOUD_RUN_WORKLOADS:
        # An accelerator VM whose startup script starts no vLLM server the reader can see
        # (`bash /opt/start.sh`): its server, if any, is started where the policies cannot look.
        reading.problems.append(
            f"the startup script of this {gpu} node starts no vLLM server the policies can "
            "see (a script file or program they cannot look into); give the `vllm serve` "
            "(or `docker run`) command in the script itself"
        )
    return reading


def startup_scripts(
    props: Mapping[str, Any], reading: Reading | None = None
) -> list[tuple[str, str]]:
    """Startup scripts in instance/TPU metadata (an unknown one is noted in `reading`)."""
    scripts: list[tuple[str, str]] = []
    metadata, unknown = read_field(props, "metadata")
    if unknown and reading is not None:
        reading.problems.append("metadata is not known (a value unknown at preview)")
    for key in list(metadata) if isinstance(metadata, Mapping) else []:
        if str(key) not in ("startup-script", "startup_script"):
            continue
        value, value_unknown = read_field(metadata, str(key))
        if isinstance(value, str):
            scripts.append((f"metadata.{key}", value))
        elif value_unknown and reading is not None:
            reading.problems.append(
                f"metadata.{key} is not known (a value unknown at preview); the vLLM options "
                "cannot be checked"
            )
    direct, direct_unknown = read_field(props, "metadataStartupScript")
    if isinstance(direct, str):
        scripts.append(("metadataStartupScript", direct))
    elif direct_unknown and reading is not None:
        reading.problems.append("metadataStartupScript is not known (a value unknown at preview)")
    return scripts
