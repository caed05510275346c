"""The vLLM servers a resource starts, read from the one shape the package renders.

:func:`workload_of` turns a resource into a :class:`Workload` (the containers it runs, or a
machine's startup scripts and TPU launch document); :func:`read_workload` answers with the
vLLM servers it starts and what could not be read. A container is read only as the command
`["vllm", "serve"]` with its argument list, and a machine only as the package's TPU launcher
with its `vllm-launch` document (:mod:`serving.render.tpu_startup`); every other shape that
may start vLLM (a Compute Engine machine with accelerators among them) is refused by name
(:mod:`serving.launch.vllm_args`, docs/accepted-shapes.md) through `vllm-server-readable`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policies import _devices, _k8s
from policies._props import get, is_list, items, read_field, read_list, walk
from policies._resources import (
    CLOUD_RUN_WORKLOADS,
    SERVICE,
    TPU_QUEUED_RESOURCE,
    TPU_VM,
    V1_SERVICE,
    VllmServer,
    accelerator,
    containers,
    find_hardware,
    is_gpu_service,
    speculative_config,
    volumes,
)
from serving.catalog.checkpoints import Checkpoint, resolve_checkpoint
from serving.catalog.hardware import HardwareProfile, Platform
from serving.catalog.models import Quantization
from serving.launch.vllm_args import (
    SERVE_COMMAND,
    ReadError,
    device_count,
    env_problems,
    is_vllm_image,
    mentions_vllm,
    parse_serve_args,
    serve_args,
)
from serving.render.compile_cache import CACHE_ENVS, CACHE_PREFIX
from serving.render.tpu_startup import (
    CONTAINER_ENV,
    LAUNCH_KEY,
    LAUNCHER,
    SECRET_ENV,
    read_launch,
)
from serving.render.vllm import MODEL_MOUNT_PATH

#: Machine families that come with accelerators attached (A2/A3/A4 and G2/G4 GPUs, CT TPUs).
ACCELERATOR_MACHINE = re.compile(r"^(a2|a3|a4|a4x|g2|g4|ct\d+[a-z]*)-", re.I)
#: Metadata keys besides `startup-script` that the guest agent runs (`startup-script-url`,
#: `user-data`, `shutdown-script`, Windows `*-script-ps1`, a container declaration ...).
_SCRIPT_KEY = re.compile(r"script|user-data|container-declaration", re.I)
#: Project-wide metadata: every Compute Engine machine of the project inherits its scripts.
PROJECT_METADATA = "gcp:compute/projectMetadata:ProjectMetadata"
PROJECT_METADATA_ITEM = "gcp:compute/projectMetadataItem:ProjectMetadataItem"


@dataclass(frozen=True)
class ContainerSpec:
    """One container as any platform declares it."""

    name: str
    image: str | None
    #: None when not given (the image's entrypoint runs).
    command: list[str] | None
    args: list[str] | None
    #: name -> literal value, or None for a value the reader does not know (a secret).
    env: dict[str, str | None]
    #: The container is the one the accelerator is attached to.
    holds_accelerator: bool
    #: (volume name, mount path) pairs.
    volume_mounts: tuple[tuple[str, str], ...] = ()
    #: Parts of it unknown at preview ("command", "args", "env").
    unknown: tuple[str, ...] = ()
    #: Commands the kubelet runs inside the container (exec hooks and probes).
    hooks: tuple[str, ...] = ()
    #: Mount paths whose root is not the volume's root (`subPath`, gcsfuse `only-dir`).
    remapped_mounts: tuple[str, ...] = ()
    #: Accelerator devices its limit declares (None: not known) and where that was read.
    devices: _devices.Count = (None, "")


#: A vLLM container may mount, besides the model bucket, only shared memory.
SHARED_MEMORY = "/dev/shm"


def _only_dir_options(volume: Any) -> list[tuple[str, str]]:
    """Each `only-dir` option of a Cloud Storage volume (Cloud Run's `gcs.mountOptions` list, or
    a CSI volume's comma-separated `mountOptions`), in any spelling: (as written, its value)."""
    raws = [
        get(volume, "gcs", "mountOptions"),
        get(volume, "csi", "volumeAttributes", "mountOptions"),
    ]
    found = []
    for raw in raws:
        parts = [raw] if isinstance(raw, str) else [p for p in items(raw) if isinstance(p, str)]
        for part in parts:
            for option in re.split(r"[,;\s]+", part):
                name, _, value = option.partition("=")
                if name.lstrip("-").replace("_", "-").lower() == "only-dir":
                    found.append((name, value))
    return found


def only_dir(volume: Any) -> str | None:
    """The folder a Cloud Storage volume shows with gcsfuse's `only-dir` option, read leniently
    (any spelling: a remapped root is refused wherever the weights must be the bucket's), without
    surrounding slashes; None without the option."""
    options = _only_dir_options(volume)
    return options[0][1].strip("/") if options else None


def cache_only_dir(volume: Any) -> str | None:
    """The folder a volume shows, read strictly, for a claim that it is a compile cache: one
    `only-dir=FOLDER` as the package writes it; None for no option, another spelling (which
    gcsfuse may not read as this) or two values (which one gcsfuse keeps is not ours to guess)."""
    options = _only_dir_options(volume)
    if not options or any(name != "only-dir" for name, _ in options):
        return None
    folders = {value.strip("/") for _, value in options}
    return folders.pop() if len(folders) == 1 else None


def remaps_root(volume: Any) -> bool:
    """A Cloud Storage volume mounted with `only-dir`: its mount shows a folder of the
    bucket, not the bucket's root."""
    return only_dir(volume) is not None


def is_cache_volume(volume: Any) -> bool:
    """A Cloud Storage volume showing a folder under `compile-cache/` (the package's compile
    cache; `compile-cache-keyed` holds it to the server's own key)."""
    folder = cache_only_dir(volume)
    return folder is not None and folder.startswith(CACHE_PREFIX + "/")


def _mounts(
    container: Any, remapped_volumes: set[str]
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """(volume name, mount path) of a container's mounts, and the paths whose root is
    remapped (`subPath`, `subPathExpr`, or a volume mounted with `only-dir`)."""
    mounts: list[tuple[str, str]] = []
    remapped: list[str] = []
    for m in items(get(container, "volumeMounts")):
        name, path = get(m, "name"), get(m, "mountPath")
        if not (isinstance(name, str) and isinstance(path, str)):
            continue
        mounts.append((name, path))
        if get(m, "subPath") or get(m, "subPathExpr") or name in remapped_volumes:
            remapped.append(path)
    return tuple(mounts), tuple(remapped)


@dataclass(frozen=True)
class Workload:
    """What a resource runs, in the reader's terms."""

    resource_type: str
    accelerator: str | None
    containers: tuple[ContainerSpec, ...] = ()
    #: (where, script text) of the machines' startup scripts.
    startup_scripts: tuple[tuple[str, str], ...] = ()
    #: The machine's `vllm-launch` metadata (the TPU launcher's document), if any.
    launch: str | None = None
    #: The resource runs accelerators (so an unseen server is refused).
    runs_accelerator: bool = False
    #: Volume name -> True when it is a Cloud Storage volume (the model bucket kind).
    gcs_volumes: frozenset[str] = frozenset()
    #: The Cloud Storage volumes that show a compile cache folder (:func:`is_cache_volume`).
    cache_volumes: frozenset[str] = frozenset()
    #: Problems found while building the workload (unknown metadata, a script URL).
    problems: tuple[str, ...] = ()
    #: Accelerator devices the machine declares (None: not known) and where that was read.
    devices: _devices.Count = (None, "")


@dataclass
class Reading:
    """What a resource starts: its vLLM servers, and what could not be read."""

    servers: list[VllmServer] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _strings_or_unknown(value: Any) -> tuple[list[str] | None, bool]:
    """Elements of a string list (None when absent), and whether any part is unknown."""
    if value is None:
        return None, False
    if not is_list(value):
        return None, True
    found, unknown = read_list(value)
    out = [item for item in found if isinstance(item, str)]
    return out, unknown or len(out) < len(found)


def _envs(container: Any) -> tuple[dict[str, str | None], bool]:
    """A Cloud Run container's environment: literal values, None for secret references."""
    found: dict[str, str | None] = {}
    raw, unknown = read_field(container, "envs")
    for env in items(raw):
        name, name_unknown = read_field(env, "name")
        value, value_unknown = read_field(env, "value")
        if not isinstance(name, str):
            unknown = unknown or name_unknown
            continue
        found[name] = value if isinstance(value, str) and not value_unknown else None
    return found, unknown


def _container_spec(
    container: Any,
    index: int,
    command_key: str,
    env: tuple[dict[str, str | None], bool],
    holds_accelerator: bool,
    remapped_volumes: set[str],
    hooks: tuple[str, ...] = (),
) -> ContainerSpec:
    """One container as the reader takes it (Cloud Run names its command `commands`)."""
    name = str(get(container, "name") or f"#{index}")
    raw_commands, commands_unknown = read_field(container, command_key)
    raw_args, args_unknown = read_field(container, "args")
    commands, c_unknown = _strings_or_unknown(raw_commands)
    args, a_unknown = _strings_or_unknown(raw_args)
    image, _ = read_field(container, "image")
    flags = (
        ("command", commands_unknown or c_unknown),
        ("args", args_unknown or a_unknown),
        ("env", env[1]),
    )
    mounts, remapped = _mounts(container, remapped_volumes)
    return ContainerSpec(
        name=name,
        image=image if isinstance(image, str) else None,
        command=commands,
        args=args,
        env=env[0],
        holds_accelerator=holds_accelerator,
        volume_mounts=mounts,
        unknown=tuple(what for what, flag in flags if flag),
        hooks=hooks,
        remapped_mounts=remapped,
        devices=_devices.container_count(container, f"container {name!r}"),
    )


def _cloud_run_containers(resource_type: str, props: Mapping[str, Any]) -> list[ContainerSpec]:
    all_containers = containers(resource_type, props)
    gpu = is_gpu_service(resource_type, props)
    remapped_volumes = {
        str(get(v, "name")) for v in volumes(resource_type, props) if remaps_root(v)
    }
    return [
        _container_spec(
            container,
            index,
            "commands",
            _envs(container),
            bool(get(container, "resources", "limits", "nvidia.com/gpu"))
            or (gpu and len(all_containers) == 1),
            remapped_volumes,
        )
        for index, container in enumerate(all_containers)
    ]


#: Kubernetes probes and lifecycle hooks that can run a command inside the container.
_K8S_HOOKS = (
    "lifecycle.postStart",
    "lifecycle.preStop",
    "startupProbe",
    "livenessProbe",
    "readinessProbe",
)


def _kubernetes_containers(
    raw_containers: list[Any], pod_accelerated: bool, remapped_volumes: set[str] | None = None
) -> list[ContainerSpec]:
    """A Pod template's containers as the reader takes them."""
    specs: list[ContainerSpec] = []
    for index, container in enumerate(raw_containers):
        env = _k8s.container_env(container)
        _, env_unknown = read_field(container, "env")
        env_from, _ = read_field(container, "envFrom")
        limits = get(container, "resources", "limits")
        holds = (
            bool(get(limits, _k8s.GPU_RESOURCE))
            or bool(get(limits, _k8s.TPU_RESOURCE))
            # A dynamic resource allocation claim may be an accelerator: which device it
            # is lies in a ResourceClaim the policies do not read, so it counts as one.
            or bool(items(get(container, "resources", "claims")))
            # With NVIDIA's container runtime this variable alone exposes the node's GPUs.
            or env.get("NVIDIA_VISIBLE_DEVICES", "void") not in ("void", "none", "")
        )
        hooks = tuple(
            f"{hook}.exec"
            for hook in _K8S_HOOKS
            if get(container, *hook.split("."), "exec") is not None
        )
        specs.append(
            _container_spec(
                container,
                index,
                "command",
                # envFrom brings in variables whose names the reader cannot see.
                (env, env_unknown or bool(items(env_from))),
                holds or (pod_accelerated and len(raw_containers) == 1),
                remapped_volumes or set(),
                hooks,
            )
        )
    return specs


def _kubernetes_workload(resource_type: str, props: Mapping[str, Any]) -> Workload:
    """A Kubernetes object: the Pod template of a workload kind, read like any container;
    any other kind that holds containers fails closed (`_k8s.unreadable`)."""
    problems = list(_k8s.unreadable(resource_type, props))
    spec = _k8s.pod_spec(resource_type, props)
    if spec is None:
        return Workload(resource_type=resource_type, accelerator=None, problems=tuple(problems))
    raw: list[Any] = []
    for key in ("initContainers", "containers"):
        value, _ = read_field(spec, key)
        raw += [c for c in items(value) if isinstance(c, Mapping)]
    ephemeral, ephemeral_unknown = read_field(spec, "ephemeralContainers")
    if ephemeral_unknown or items(ephemeral):
        problems.append(
            "the Pod spec declares ephemeralContainers, which run code inside the Pod beside "
            "the vLLM server where the policies do not read it; remove them"
        )
    pod_accelerator = _k8s.accelerator(resource_type, props)
    remapped_volumes = {
        str(get(v, "name")) for v in _k8s.volumes(resource_type, props) if remaps_root(v)
    }
    specs = tuple(_kubernetes_containers(raw, pod_accelerator is not None, remapped_volumes))
    runs_accelerator = pod_accelerator is not None or any(c.holds_accelerator for c in specs)
    if runs_accelerator:
        problems += _pod_reach_problems(spec, raw)
    if (
        pod_accelerator is not None
        and len(specs) > 1
        and not any(c.holds_accelerator for c in specs)
    ):
        problems.append(
            f"this Pod runs on {pod_accelerator} with {len(specs)} containers and none "
            "declares the accelerator (a nvidia.com/gpu or google.com/tpu limit, or a resource "
            "claim), so which one uses it is not known; set it on the vLLM container"
        )
    gcs = frozenset(
        str(get(v, "name"))
        for v in _k8s.volumes(resource_type, props)
        if get(v, "csi", "driver") == _k8s.GCSFUSE_DRIVER
    )
    return Workload(
        resource_type=resource_type,
        accelerator=pod_accelerator,
        containers=specs,
        runs_accelerator=runs_accelerator,
        gcs_volumes=gcs,
        cache_volumes=_cache_volumes(_k8s.volumes(resource_type, props), gcs),
        problems=tuple(problems),
    )


def _pod_reach_problems(spec: Any, raw_containers: list[Any]) -> list[str]:
    """What lets code outside the vLLM command reach into the server of an accelerator Pod,
    or the network around it: a shared process namespace or the host's (a container then
    reads and writes the server's memory and files through /proc), a privileged container,
    or any added capability (`SYS_PTRACE`, `NET_ADMIN`, `NET_RAW`, ...: the package adds
    none)."""
    problems = []
    for key in ("shareProcessNamespace", "hostPID", "hostIPC"):
        if get(spec, key) is True:
            problems.append(
                f"the Pod sets {key}: true, so another process can reach into the vLLM "
                "server's memory and files, which the policies do not read; remove it"
            )
    for index, container in enumerate(raw_containers):
        name = get(container, "name") or f"#{index}"
        context = get(container, "securityContext")
        added = sorted(
            {
                str(c).upper().removeprefix("CAP_")
                for c in items(get(context, "capabilities", "add"))
            }
        )
        if get(context, "privileged") is True or added:
            what = "privileged" if get(context, "privileged") is True else ", ".join(added)
            problems.append(
                f"container {name!r} runs {what}, so it can reach into the other containers, "
                "their traffic and the node, where the policies do not read what it changes; "
                "the package adds no capability: remove it"
            )
    return problems


def _cache_volumes(declared: list[Mapping[str, Any]], gcs: frozenset[str]) -> frozenset[str]:
    return frozenset(
        str(get(v, "name")) for v in declared if str(get(v, "name")) in gcs and is_cache_volume(v)
    )


def workload_of(resource_type: str, props: Mapping[str, Any]) -> Workload:
    """The Workload of any resource (an empty one for resources that run nothing)."""
    problems: list[str] = []
    if _k8s.is_kubernetes(resource_type):
        return _kubernetes_workload(resource_type, props)
    if resource_type in CLOUD_RUN_WORKLOADS:
        gpu = is_gpu_service(resource_type, props)
        gcs = frozenset(
            str(get(v, "name")) for v in volumes(resource_type, props) if get(v, "gcs") is not None
        )
        specs = tuple(_cloud_run_containers(resource_type, props))
        if gpu and len(specs) > 1 and not any(c.holds_accelerator for c in specs):
            problems.append(
                f"this GPU workload runs {len(specs)} containers and none declares the "
                "nvidia.com/gpu limit, so which one holds the GPU is not known; set it on the "
                "vLLM container"
            )
        return Workload(
            resource_type=resource_type,
            accelerator=accelerator(resource_type, props),
            containers=specs,
            runs_accelerator=gpu,
            gcs_volumes=gcs,
            cache_volumes=_cache_volumes(volumes(resource_type, props), gcs),
            problems=tuple(problems),
        )
    if resource_type == V1_SERVICE:
        return Workload(
            resource_type=resource_type,
            accelerator=None,
            problems=(
                f"a Cloud Run v1 service, which the package never renders; declare it as a "
                f"{SERVICE}",
            ),
        )
    if resource_type in (PROJECT_METADATA, PROJECT_METADATA_ITEM):
        return Workload(
            resource_type=resource_type,
            accelerator=None,
            problems=tuple(_project_metadata_problems(resource_type, props)),
        )
    if resource_type == TPU_QUEUED_RESOURCE:
        return Workload(
            resource_type=resource_type,
            accelerator=accelerator(resource_type, props) or "TPU",
            runs_accelerator=True,
            problems=(
                "pulumi-gcp's V2QueuedResource cannot carry a startup script (its node spec "
                "has no metadata), so the vLLM server its TPU nodes run is started where the "
                "policies cannot see it; declare the nodes with the project's TPU component, "
                "whose launch document is read",
            ),
        )
    if (
        resource_type.startswith("gcp:")
        and resource_type != TPU_VM
        and resource_type not in ACCELERATOR_HOSTS
    ):
        found = _accelerator_in(props)
        if found is not None:
            kind = resource_type.rsplit(":", 1)[-1]
            return Workload(
                resource_type=resource_type,
                accelerator=None,
                problems=(
                    f"this {kind} ({resource_type}) runs accelerators ({found}) but is a "
                    "resource type whose server the policies cannot read (a Compute Engine "
                    "machine, a notebook, a managed job ...); serve with Cloud Run, the "
                    "project's TPU VM, or a GKE workload",
                ),
            )
    machine_accelerator = accelerator(resource_type, props)
    if resource_type == TPU_VM:
        machine_accelerator = machine_accelerator or "TPU"
    runs_accelerator = machine_accelerator is not None
    scripts = _startup_scripts(props, problems, runs_accelerator)
    launch, launch_unknown = read_field(get(props, "metadata"), LAUNCH_KEY)
    if launch_unknown:
        problems.append(f"metadata.{LAUNCH_KEY} is not known (a value unknown at preview)")
    return Workload(
        resource_type=resource_type,
        accelerator=machine_accelerator,
        startup_scripts=tuple(scripts),
        launch=launch if isinstance(launch, str) else None,
        runs_accelerator=runs_accelerator,
        problems=tuple(problems),
        devices=_devices.machine_count(resource_type, props, accelerator(resource_type, props)),
    )


#: Resource types that name accelerators without running a server of their own: GKE node
#: pools and clusters run Pods (read as Kubernetes objects); reservations, commitments and
#: resource policies only reserve or pay for capacity.
ACCELERATOR_HOSTS = frozenset(
    {
        "gcp:container/nodePool:NodePool",
        "gcp:container/cluster:Cluster",
        "gcp:compute/reservation:Reservation",
        "gcp:compute/futureReservation:FutureReservation",
        "gcp:compute/regionCommitment:RegionCommitment",
        "gcp:compute/resourcePolicy:ResourcePolicy",
    }
)


def _accelerator_in(props: Any) -> str | None:
    """Where a props tree asks for accelerators: a key naming accelerators with a value that
    is not empty or zero, or an accelerator machine type."""
    for path, key, child, _ in walk(props):
        if isinstance(key, str) and "accelerator" in key.lower() and _asks(child):
            return path
        if (
            key == "machineType"
            and isinstance(child, str)
            and ACCELERATOR_MACHINE.match(child.rsplit("/", 1)[-1])
        ):
            return path
    return None


def _asks(value: Any) -> bool:
    """An accelerator setting asks for devices: a config unless its count is zero, a list
    when any entry does, any other value unless empty or zero."""
    if isinstance(value, Mapping):
        count = value.get("count", value.get("coreCount", 1))
        return count not in (0, "0", 0.0)
    if is_list(value):
        return any(_asks(v) for v in items(value))
    return value not in (None, "", 0, "0", False)


def _project_metadata_problems(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Project metadata that starts code: every machine of the project without its own
    key runs it, accelerator machines included, where no server can be tied to it."""
    if resource_type == PROJECT_METADATA_ITEM:
        key, unknown = read_field(props, "key")
        keys = [str(key)]
    else:
        metadata, unknown = read_field(props, "metadata")
        keys = [str(k) for k in metadata] if isinstance(metadata, Mapping) else []
    if unknown:
        return ["the project metadata is not known (a value unknown at preview)"]
    return [
        f"project metadata {k!r} is run by every Compute Engine machine of the project that "
        "does not set its own, accelerator machines included, where the policies cannot tie "
        "it to a server; set startup scripts on each machine"
        for k in keys
        if _SCRIPT_KEY.search(k)
    ]


def _startup_scripts(
    props: Mapping[str, Any], problems: list[str], runs_accelerator: bool
) -> list[tuple[str, str]]:
    scripts: list[tuple[str, str]] = []
    metadata, unknown = read_field(props, "metadata")
    if unknown:
        problems.append("metadata is not known (a value unknown at preview)")
    for key in list(metadata) if isinstance(metadata, Mapping) else []:
        name = str(key)
        value, value_unknown = read_field(metadata, name)
        if name == "startup-script":
            if isinstance(value, str):
                scripts.append((f"metadata.{name}", value))
            elif value_unknown:
                problems.append(
                    f"metadata.{name} is not known (a value unknown at preview); the vLLM "
                    "options cannot be checked"
                )
        elif runs_accelerator and _SCRIPT_KEY.search(name):
            problems.append(
                f"metadata.{name} may start code the guest agent runs, which the policies "
                "cannot see into; accepted: the package's launcher in metadata.startup-script"
            )
    direct, direct_unknown = read_field(props, "metadataStartupScript")
    if isinstance(direct, str):
        scripts.append(("metadataStartupScript", direct))
    elif direct_unknown:
        problems.append("metadataStartupScript is not known (a value unknown at preview)")
    return scripts


def vllm_servers(resource_type: str, props: Mapping[str, Any]) -> list[VllmServer]:
    """Every vLLM server a resource starts, with the options in effect."""
    return read_servers(resource_type, props).servers


def read_servers(resource_type: str, props: Mapping[str, Any]) -> Reading:
    """The servers a resource starts (:func:`workload_of`, then :func:`read_workload`)."""
    return read_workload(workload_of(resource_type, props))


def read_workload(workload: Workload) -> Reading:
    """Every vLLM server a workload starts, with the options in effect, and what could not
    be read (the single entry point for every platform)."""
    reading = Reading(problems=list(workload.problems))
    hardware = find_hardware(workload.accelerator)
    for spec in workload.containers:
        _read_container(spec, workload, hardware, reading)
    for key, script in workload.startup_scripts:
        _read_script(f"startup script ({key})", script, workload, hardware, reading)
    if (
        workload.runs_accelerator
        and not workload.containers
        and not workload.startup_scripts
        and not workload.problems
    ):
        reading.problems.append(
            f"this resource runs {workload.accelerator} but declares no startup script or "
            "container the policies can read, so the server it runs (if any) is started where "
            "they cannot see it"
        )
    return reading


def _read_container(
    spec: ContainerSpec, workload: Workload, hardware: HardwareProfile | None, reading: Reading
) -> None:
    where = f"container {spec.name!r}"
    command, args = spec.command or [], spec.args or []
    if command == ["hf"] and args[:1] == ["download"] and not spec.holds_accelerator:
        return  # the package's download job: it starts no server
    might_run_vllm = (
        spec.holds_accelerator
        or (spec.image is not None and is_vllm_image(spec.image))
        or mentions_vllm(command + args)
    )
    if spec.unknown:
        if might_run_vllm:
            reading.problems.append(
                f"{where}: its {spec.unknown[0]} are not known (a value unknown at preview); "
                "the vLLM options cannot be checked"
            )
        return
    if tuple(command) != SERVE_COMMAND and not might_run_vllm:
        return
    try:
        argv = serve_args(spec.command, spec.args)
    except ReadError as exc:
        kind = "TPU" if "tpu" in (workload.accelerator or "").lower() else "GPU"
        holds = f" holds the {kind};" if spec.holds_accelerator else ":"
        reading.problems.append(f"{where}{holds} {exc}")
        return
    _add(argv, spec.image, where, workload, hardware, reading, spec.env, spec)
    for hook in spec.hooks:
        reading.problems.append(
            f"{where}: its {hook} runs a command inside the vLLM container, where it may "
            "start another server or change the files vLLM loads, which the policies do "
            "not read; use httpGet probes and no exec hooks"
        )


def _read_script(
    where: str,
    script: str,
    workload: Workload,
    hardware: HardwareProfile | None,
    reading: Reading,
) -> None:
    """A machine runs the package's TPU launcher with its launch document, or no vLLM."""
    if script != LAUNCHER:
        if workload.runs_accelerator or mentions_vllm([script]):
            reading.problems.append(
                f"{where}: the startup-script is not the package's launcher "
                "(serving/render/tpu_startup.py LAUNCHER), so what it starts cannot be read; "
                f"accepted: that launcher, with the vLLM launch in metadata.{LAUNCH_KEY}"
            )
        return
    if not _runs_tpu(workload, hardware):
        reading.problems.append(
            f"{where}: the package's TPU launcher starts vLLM with `docker run --privileged`, "
            f"which only a TPU machine needs; this {workload.accelerator or 'machine'} is not one"
        )
        return
    if workload.launch is None:
        reading.problems.append(f"{where}: the package's launcher without metadata.{LAUNCH_KEY}")
        return
    try:
        launch = read_launch(workload.launch)
        args = launch["args"]
    except ValueError as exc:
        reading.problems.append(f"{where}: {exc}")
        return
    env = {**dict.fromkeys(SECRET_ENV), **CONTAINER_ENV}
    _add(args, launch["image"], where, workload, hardware, reading, env, None)


def _add(
    argv: list[str],
    image: str | None,
    where: str,
    workload: Workload,
    hardware: HardwareProfile | None,
    reading: Reading,
    env: Mapping[str, str | None],
    spec: ContainerSpec | None,
) -> None:
    """Read one `vllm serve`'s arguments and judge them against the resource."""
    try:
        args, problems = parse_serve_args(argv)
    except ReadError as exc:
        reading.problems.append(f"{where}: {exc}")
        return
    problems += env_problems(env)
    devices = device_count(args)
    available, source = spec.devices if spec is not None else workload.devices
    asked = (
        f"it asks for {devices} devices (--tensor-parallel-size x --pipeline-parallel-size "
        "x --prefill-context-parallel-size x the local --data-parallel-size)"
    )
    if devices is not None and devices > 1 and available is None:
        problems.append(
            f"{asked}, and how many devices the resource gives it cannot be told "
            f"({source or 'the resource declares no count'}); declare the count (a "
            "nvidia.com/gpu or google.com/tpu limit on the container, "
            "a single-host TPU accelerator type) or ask for 1 device"
        )
    elif devices is not None and available is not None and devices > available:
        problems.append(
            f"{asked}, more than the {available} {workload.accelerator or 'accelerator'} the "
            f"resource has ({source}; accepted: a product of {available} or less)"
        )
    mounts = spec.volume_mounts if spec is not None else ()
    remapped = spec.remapped_mounts if spec is not None else ()
    model_mounts = (
        {path for name, path in mounts if name in workload.gcs_volumes and path not in remapped}
        if spec is not None
        # The TPU launcher copies the bucket's folders to this path on the node's disk.
        else {MODEL_MOUNT_PATH}
    )
    for path in remapped:
        for served in (args.get("model"), _drafter(args)):
            if isinstance(served, str) and served.startswith(path.rstrip("/") + "/"):
                problems.append(
                    f"the served path {served!r} is under {path!r}, a mount whose root is not "
                    "the bucket's root (a subPath, subPathExpr or only-dir), so the folder is "
                    "not the one the download job writes; mount the bucket itself"
                )
    checkpoint, why = resolve_checkpoint(args.get("model"), model_mounts)
    if why is not None:
        problems.append(why)
    drafter = _drafter(args)
    drafter_checkpoint: Checkpoint | None = None
    if drafter is not None:
        drafter_checkpoint, why = resolve_checkpoint(drafter, model_mounts)
        if why is not None:
            problems.append(f"the drafter: {why}")
    problems += checkpoint_option_problems(args, checkpoint, drafter_checkpoint)
    served_from = {c.mount for c in (checkpoint, drafter_checkpoint) if c and c.mount}
    # The compile cache: written only by servers of the same key (compile-cache-keyed).
    cache_dirs = {env[n] for n in CACHE_ENVS if env.get(n)}
    for name, path in mounts:
        if (
            path.rstrip("/") == SHARED_MEMORY
            or (name in workload.gcs_volumes and path in served_from)
            or (name in workload.cache_volumes and path in cache_dirs)
        ):
            continue
        problems.append(
            f"it mounts volume {name!r} at {path!r}, whose files (written by another "
            "container, a job or the host) may be code or data vLLM and Python load, which the "
            "policies cannot see; a vLLM container mounts only the model bucket folder it "
            f"serves from, its compile cache folder (compile-cache/<key>, at "
            f"{' or '.join(CACHE_ENVS)}) and {SHARED_MEMORY}"
        )
    reading.problems += [f"{where}: {p}" for p in dict.fromkeys(problems)]
    reading.servers.append(
        VllmServer(
            resource_type=workload.resource_type,
            args=args,
            accelerator=workload.accelerator,
            hardware=hardware,
            image=image,
            where=where,
            # Loaded another way than the catalogue says (`--quantization fp8`), a checkpoint
            # is no longer the catalogue's: the QAT and memory policies then do not know it.
            checkpoint=_as_loaded(checkpoint, args.get("quantization")),
            drafter_checkpoint=_as_loaded(
                drafter_checkpoint, _speculative_field(args, "quantization")
            ),
        )
    )


def _runs_tpu(workload: Workload, hardware: HardwareProfile | None) -> bool:
    """A TPU VM, or the project's TPU resource on a TPU accelerator type (`v6e-4`)."""
    if workload.resource_type == TPU_VM or (hardware and hardware.platform is Platform.TPU):
        return True
    return bool(workload.accelerator and re.match(r"^v\d+[a-z]*-\d", workload.accelerator))


#: A path inside a checkpoint folder: plain names, no `.` or `..`, no glob or expansion.
_PLAIN_PATH = re.compile(r"(/[A-Za-z0-9_][A-Za-z0-9._-]*)+")


def _folder(checkpoint: Checkpoint | None) -> str | None:
    """The folder the download job writes the checkpoint to (None: downloaded at boot)."""
    if checkpoint is None or checkpoint.mount is None:
        return None
    return f"{checkpoint.mount.rstrip('/')}/{checkpoint.card.folder}"


def _quantization_problem(given: Any, checkpoint: Checkpoint | None, what: str) -> str | None:
    if given is None:
        return None
    if checkpoint is None:
        return (
            f"{what} {given!r} is given for a checkpoint that is not known, so the "
            "quantisation the QAT and memory policies count cannot be known"
        )
    own = checkpoint.card.quantization
    if own is not Quantization.NONE and given == own.value:
        return None
    accepted = f"{own.value!r} or none" if own is not Quantization.NONE else "none: omit it"
    return (
        f"{what} {given!r} changes how {checkpoint.card.repo_id} is loaded from what the "
        f"catalogue says ({own.value}), which the QAT and memory policies count (accepted: "
        f"{accepted})"
    )


def _as_loaded(checkpoint: Checkpoint | None, quantization: Any) -> Checkpoint | None:
    """The checkpoint as vLLM loads it: None when `--quantization` changes its format."""
    if _quantization_problem(quantization, checkpoint, "") is not None:
        return None
    return checkpoint


def checkpoint_option_problems(
    args: Mapping[str, Any], checkpoint: Checkpoint | None, drafter: Checkpoint | None
) -> list[str]:
    """Options judged against the served checkpoint: `--quantization` (and the drafter's),
    `--tokenizer-revision`, and the files `--chat-template` and `--generation-config` read."""
    problems: list[str] = []
    for problem in (
        _quantization_problem(args.get("quantization"), checkpoint, "--quantization"),
        _quantization_problem(
            _speculative_field(args, "quantization"), drafter, "--speculative-config quantization"
        ),
    ):
        if problem is not None:
            problems.append(problem)
    folder = _folder(checkpoint)
    tokenizer_revision = args.get("tokenizer-revision")
    if tokenizer_revision is not None and tokenizer_revision != args.get("revision"):
        problems.append(
            f"--tokenizer-revision {tokenizer_revision!r} reads the tokenizer at another "
            f"revision than the served checkpoint's (--revision {args.get('revision')!r}); "
            "give the same revision or none"
        )
    template = args.get("chat-template")
    if template is not None:
        inside = (
            folder is not None
            and isinstance(template, str)
            and template.startswith(folder + "/")
            and _PLAIN_PATH.fullmatch(template) is not None
        )
        if not inside:
            shown = template if len(str(template)) <= 80 else str(template)[:77] + "..."
            accepted = (
                f"a file inside {folder}, named without `.`, `..` or globs"
                if folder is not None
                else "none where the checkpoint is downloaded at boot or not known: omit it, "
                "and the checkpoint's own template is used"
            )
            problems.append(
                f"--chat-template {shown!r} renders prompts with a template from outside the "
                "served checkpoint (a file elsewhere, or the template's text), which the "
                f"policies cannot judge (accepted: {accepted})"
            )
    generation = args.get("generation-config")
    if (
        generation is not None
        and generation not in ("auto", "vllm")
        and (folder is None or str(generation).rstrip("/") != folder)
    ):
        problems.append(
            f"--generation-config {generation!r} reads sampling defaults from another "
            "folder than the served checkpoint's, which the policies cannot judge "
            f"(accepted: auto, vllm{', ' + folder if folder else ''})"
        )
    return problems


def _drafter(args: Mapping[str, Any]) -> str | None:
    model = _speculative_field(args, "model")
    return model if isinstance(model, str) else None


def _speculative_field(args: Mapping[str, Any], name: str) -> Any:
    """A field of `--speculative-config` (the drafter's `model`, its `revision`)."""
    spec, _ = speculative_config(args)
    return None if spec is None else spec.get(name)
