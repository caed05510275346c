"""Read resources as the Pulumi engine sends them to a policy (camelCase props).

Props may be plain dicts and lists (tests, mocks) or pulumi-policy's read-only proxies (the
engine), which are `Mapping`/`Sequence` but not `dict`/`list` and raise `UnknownValueError`
for values that are unknown during preview. Numbers may arrive as floats (8080.0). Every
helper here accepts all of those and treats an unknown value as absent.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from serving.hardware import HARDWARE, HardwareProfile, Platform
from serving.models import MODELS, ModelCard
from serving.vllm import VLLM_COMMAND, parse_args

SERVICE = "gcp:cloudrunv2/service:Service"
JOB = "gcp:cloudrunv2/job:Job"
IAM_MEMBER = "gcp:cloudrunv2/serviceIamMember:ServiceIamMember"
IAM_BINDING = "gcp:cloudrunv2/serviceIamBinding:ServiceIamBinding"
IAM_POLICY = "gcp:cloudrunv2/serviceIamPolicy:ServiceIamPolicy"
FIREWALL = "gcp:compute/firewall:Firewall"
TPU_QUEUED_RESOURCE = "gcp:tpu/v2QueuedResource:V2QueuedResource"
TPU_VM = "gcp:tpu/v2Vm:V2Vm"
COMPUTE_INSTANCE = "gcp:compute/instance:Instance"

#: What vLLM uses when an option is not given (the refusal messages quote 2048 batched tokens).
VLLM_DEFAULTS: dict[str, Any] = {
    "gpu-memory-utilization": 0.9,
    "max-num-batched-tokens": 2048,
    "max-num-seqs": 256,
    "kv-cache-dtype": "auto",
    "dtype": "auto",
}

_SHELL_STOP = frozenset({";", "&&", "||", "|", "&", ">", ">>", "2>&1", "<"})


def get(value: Any, *path: str | int) -> Any:
    """Follow `path` through mappings and sequences; None when absent or unknown."""
    current = value
    for step in path:
        try:
            if isinstance(step, int):
                if not is_list(current) or step >= len(current):
                    return None
                current = current[step]
            else:
                if not isinstance(current, Mapping) or step not in current:
                    return None
                current = current[step]
        except UnknownValueError:
            return None
    return current


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def items(value: Any) -> list[Any]:
    """Elements of a list-like value (unknown elements skipped); [] for anything else."""
    if not is_list(value):
        return []
    out = []
    for index in range(len(value)):
        try:
            out.append(value[index])
        except UnknownValueError:
            continue
    return out


def entries(value: Any) -> Iterator[tuple[str, Any]]:
    """Key/value pairs of a mapping, skipping unknown values."""
    if not isinstance(value, Mapping):
        return
    for key in list(value):
        try:
            yield str(key), value[key]
        except UnknownValueError:
            continue


def strings(value: Any) -> list[str]:
    return [v for v in items(value) if isinstance(v, str)]


def as_int(value: Any) -> int | None:
    """An integer from an int, an integral float (8080.0) or a numeric string."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return int(number) if number.is_integer() else None
    return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def cpu_quantity(value: Any) -> float | None:
    """Kubernetes CPU quantity: "4", "4.0", "4000m", 4."""
    if isinstance(value, str) and value.strip().endswith("m"):
        millis = as_float(value.strip()[:-1])
        return None if millis is None else millis / 1000
    return as_float(value)


_MEMORY_UNITS = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "K": 10**3,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}


def memory_quantity_gib(value: Any) -> float | None:
    """Kubernetes memory quantity in GiB: "16Gi", "16384Mi", "17G", bytes."""
    if not isinstance(value, str):
        number = as_float(value)
        return None if number is None else number / 2**30
    match = re.fullmatch(r"\s*([0-9.]+)\s*([KkMGT]i?)?\s*", value)
    if not match:
        return None
    number = float(match.group(1))
    unit = match.group(2)
    return number * (_MEMORY_UNITS[unit] if unit else 1) / 2**30


def containers(resource_type: str, props: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Containers of a Cloud Run service or job."""
    if resource_type == SERVICE:
        found = items(get(props, "template", "containers"))
    elif resource_type == JOB:
        found = items(get(props, "template", "template", "containers"))
    else:
        return []
    return [c for c in found if isinstance(c, Mapping)]


def accelerator(resource_type: str, props: Mapping[str, Any]) -> str | None:
    """The GPU type of a Cloud Run service, or a TPU's accelerator type."""
    if resource_type == SERVICE:
        value = get(props, "template", "nodeSelector", "accelerator")
    elif resource_type == JOB:
        value = None
    else:
        value = get(props, "acceleratorType") or get(
            props, "tpu", "nodeSpecs", 0, "node", "acceleratorType"
        )
    return value if isinstance(value, str) and value else None


def is_gpu_service(resource_type: str, props: Mapping[str, Any]) -> bool:
    """A Cloud Run service that asks for a GPU (node selector or an nvidia.com/gpu limit)."""
    if resource_type != SERVICE:
        return False
    if accelerator(resource_type, props):
        return True
    return any(get(c, "resources", "limits", "nvidia.com/gpu") for c in containers(SERVICE, props))


def find_hardware(accelerator_name: str | None) -> HardwareProfile | None:
    """The catalog profile whose `accelerator` (or key) is `accelerator_name`."""
    if not accelerator_name:
        return None
    for profile in HARDWARE.values():
        if accelerator_name in (profile.accelerator, profile.key):
            return profile
    return None


def find_card(model_ref: str | None) -> ModelCard | None:
    """The catalog card for a mounted folder (`/mnt/models/<folder>`) or a Hugging Face id."""
    if not model_ref:
        return None
    ref = model_ref.rstrip("/")
    if ref in MODELS:
        return MODELS[ref]
    folder = ref.rsplit("/", 1)[-1]
    for card in MODELS.values():
        if card.folder == folder:
            return card
    return None


def _serve_argv(tokens: list[str]) -> list[str] | None:
    """Arguments after `vllm serve` (or `docker run --entrypoint=vllm IMAGE serve`)."""
    start = None
    for i in range(len(tokens) - 1):
        if tokens[i].rsplit("/", 1)[-1] == "vllm" and tokens[i + 1] == "serve":
            start = i + 2
            break
    if start is None:
        entrypoint = any(
            t == "--entrypoint=vllm" or (t == "--entrypoint" and nxt == "vllm")
            for t, nxt in zip(tokens, [*tokens[1:], ""], strict=True)
        )
        if entrypoint and "serve" in tokens:
            start = tokens.index("serve") + 1
    if start is None:
        return None
    rest: list[str] = []
    for token in tokens[start:]:
        if token in _SHELL_STOP:
            break
        rest.append(token)
    return rest


def script_vllm_argv(script: str) -> list[str] | None:
    """The `vllm serve ...` arguments inside a shell script (TPU startup scripts)."""
    joined = re.sub(r"\\\r?\n", " ", script)
    for line in joined.splitlines():
        if "vllm" not in line or "serve" not in line:
            continue
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:
            continue
        argv = _serve_argv(tokens)
        if argv is not None:
            return argv
    return None


@dataclass(frozen=True)
class VllmServer:
    """A vLLM server declared by a resource: where it runs and the arguments it gets."""

    resource_type: str
    args: dict[str, Any]
    accelerator: str | None
    hardware: HardwareProfile | None
    image: str | None
    #: Where the arguments were found, for messages ("container 'vllm' args").
    where: str

    @property
    def model_ref(self) -> str | None:
        model = self.args.get("model")
        return model if isinstance(model, str) else None

    @property
    def card(self) -> ModelCard | None:
        return find_card(self.model_ref)

    @property
    def on_cloud_run_gpu(self) -> bool:
        return self.resource_type == SERVICE

    def value(self, option: str) -> Any:
        """The option as given, else vLLM's default (None when vLLM has none here)."""
        if option in self.args:
            return self.args[option]
        return VLLM_DEFAULTS.get(option)

    def int_value(self, option: str) -> int | None:
        return as_int(self.value(option))

    def float_value(self, option: str) -> float | None:
        return as_float(self.value(option))

    def flag(self, option: str) -> bool:
        value = self.args.get(option)
        return value is True or (isinstance(value, str) and value.lower() == "true")

    def speculative_config(self) -> tuple[dict[str, Any] | None, str | None]:
        """(config, None), (None, None) when absent, or (None, error) when it is not JSON."""
        raw = self.args.get("speculative-config")
        if raw is None:
            return None, None
        if not isinstance(raw, str):
            return None, f"--speculative-config has no value ({raw!r})"
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as exc:
            return None, f"--speculative-config is not valid JSON ({exc.msg} in {raw!r})"
        if not isinstance(parsed, dict):
            return None, f"--speculative-config must be a JSON object, got {raw!r}"
        return parsed, None


def _container_argv(container: Mapping[str, Any]) -> list[str] | None:
    commands = strings(get(container, "commands"))
    args = strings(get(container, "args"))
    argv = [*commands, *args]
    for i in range(len(argv) - 1):
        if argv[i].rsplit("/", 1)[-1] == VLLM_COMMAND[0] and argv[i + 1] == VLLM_COMMAND[1]:
            return argv[i + 2 :]
    if any("vllm.entrypoints" in a for a in commands):
        return args
    image = get(container, "image")
    if not commands and isinstance(image, str) and "vllm" in image:
        # The vLLM images' entrypoint is the OpenAI server; args are its options.
        return args
    return None


def vllm_servers(resource_type: str, props: Mapping[str, Any]) -> list[VllmServer]:
    """Every vLLM server a resource declares, with its parsed arguments."""
    gpu = accelerator(resource_type, props)
    hardware = find_hardware(gpu)
    found: list[VllmServer] = []
    if resource_type == SERVICE:
        for index, container in enumerate(containers(resource_type, props)):
            argv = _container_argv(container)
            if argv is None:
                continue
            name = get(container, "name") or f"#{index}"
            image = get(container, "image")
            found.append(
                VllmServer(
                    resource_type=resource_type,
                    args=parse_args(argv),
                    accelerator=gpu,
                    hardware=hardware,
                    image=image if isinstance(image, str) else None,
                    where=f"container {name!r}",
                )
            )
    for key, script in startup_scripts(props):
        argv = script_vllm_argv(script)
        if argv is not None:
            found.append(
                VllmServer(
                    resource_type=resource_type,
                    args=parse_args(argv),
                    accelerator=gpu,
                    hardware=hardware,
                    image=None,
                    where=f"startup script ({key})",
                )
            )
    return found


def startup_scripts(props: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Startup scripts in instance/TPU metadata."""
    scripts: list[tuple[str, str]] = []
    for key, value in entries(get(props, "metadata")):
        if key in ("startup-script", "startup_script") and isinstance(value, str):
            scripts.append((f"metadata.{key}", value))
    direct = get(props, "metadataStartupScript")
    if isinstance(direct, str):
        scripts.append(("metadataStartupScript", direct))
    return scripts


def walk_strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string inside a props tree, with its dotted path (unknown values skipped)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, child in entries(value):
            if key.startswith("__"):
                continue  # engine-internal (a dynamic provider's pickled code)
            yield from walk_strings(child, f"{path}.{key}" if path else key)
    elif is_list(value):
        for index, child in enumerate(items(value)):
            yield from walk_strings(child, f"{path}[{index}]")


def gib(value: float) -> str:
    return f"{value / 2**30:.2f} GiB"


def platform_of(hardware: HardwareProfile | None) -> Platform | None:
    return None if hardware is None else hardware.platform
