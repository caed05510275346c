"""Cloud Run and TPU resources as the policies read them (camelCase props, `policies._props`).

Numbers may arrive as floats (8080.0); every helper treats a value unknown at preview as
absent. Import direction: the launch reader (`policies._server`) imports this module, never
the reverse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from policies import _k8s
from policies._props import entries, get, is_list, items
from serving.catalog.checkpoints import Checkpoint
from serving.catalog.hardware import HARDWARE, HardwareProfile
from serving.catalog.models import ModelCard
from serving.launch.vllm_args import AUTO_LENGTHS, human_int
from serving.launch.vllm_defaults import START_UP_OPTIONS, parser_default, start_up_batch_defaults

SERVICE = "gcp:cloudrunv2/service:Service"
JOB = "gcp:cloudrunv2/job:Job"
WORKER_POOL = "gcp:cloudrunv2/workerPool:WorkerPool"
#: Cloud Run v1: the package renders none; the reader refuses it by name.
V1_SERVICE = "gcp:cloudrun/service:Service"
#: Every Cloud Run resource that runs containers (and so may run vLLM on a GPU).
CLOUD_RUN_WORKLOADS = (SERVICE, JOB, WORKER_POOL)
TPU_QUEUED_RESOURCE = "gcp:tpu/v2QueuedResource:V2QueuedResource"
TPU_VM = "gcp:tpu/v2Vm:V2Vm"


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
    """Containers of a Cloud Run service, job or worker pool, or a Kubernetes Pod template
    (`policies._k8s`)."""
    if resource_type.startswith("kubernetes:"):
        return _k8s.containers(resource_type, props)
    if resource_type in (SERVICE, WORKER_POOL):
        found = items(get(props, "template", "containers"))
    elif resource_type == JOB:
        found = items(get(props, "template", "template", "containers"))
    else:
        return []
    return [c for c in found if isinstance(c, Mapping)]


def volumes(resource_type: str, props: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Volumes of a Cloud Run v2 service, job or worker pool, or a Kubernetes Pod template."""
    if resource_type.startswith("kubernetes:"):
        return _k8s.volumes(resource_type, props)
    if resource_type in (SERVICE, WORKER_POOL):
        found = items(get(props, "template", "volumes"))
    elif resource_type == JOB:
        found = items(get(props, "template", "template", "volumes"))
    else:
        return []
    return [v for v in found if isinstance(v, Mapping)]


def accelerator(resource_type: str, props: Mapping[str, Any]) -> str | None:
    """The GPU type of a Cloud Run workload or a Kubernetes Pod template, or a TPU's
    accelerator type (`v6e-1`)."""
    if resource_type.startswith("kubernetes:"):
        return _k8s.accelerator(resource_type, props)
    if resource_type in (SERVICE, WORKER_POOL):
        value = get(props, "template", "nodeSelector", "accelerator")
    elif resource_type == JOB:
        value = get(props, "template", "template", "nodeSelector", "accelerator")
    else:
        value = get(props, "acceleratorType") or get(
            props, "tpu", "nodeSpecs", 0, "node", "acceleratorType"
        )
    return value if isinstance(value, str) and value else None


def is_gpu_service(resource_type: str, props: Mapping[str, Any]) -> bool:
    """A Cloud Run workload (service, job, worker pool) that asks for a GPU
    (node selector or an nvidia.com/gpu limit)."""
    if resource_type not in CLOUD_RUN_WORKLOADS:
        return False
    if accelerator(resource_type, props):
        return True
    return any(
        get(c, "resources", "limits", "nvidia.com/gpu") for c in containers(resource_type, props)
    )


def find_hardware(accelerator_name: str | None) -> HardwareProfile | None:
    """The catalog profile whose `accelerator` (or key) is `accelerator_name`."""
    if not accelerator_name:
        return None
    for profile in HARDWARE.values():
        if accelerator_name in (profile.accelerator, profile.key):
            return profile
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
    #: The checkpoint the served model resolves to (None: not one the stack produces; the
    #: `vllm-server-readable` policy refuses it).
    checkpoint: Checkpoint | None = None
    #: The same for the speculative-decoding drafter, when one is named.
    drafter_checkpoint: Checkpoint | None = None

    @property
    def model_ref(self) -> str | None:
        model = self.args.get("model")
        return model if isinstance(model, str) else None

    @property
    def card(self) -> ModelCard | None:
        """The catalogue card of the served checkpoint, known by its origin."""
        return None if self.checkpoint is None else self.checkpoint.card

    def value(self, option: str) -> Any:
        """The option as given, else vLLM's default (:meth:`default`)."""
        if option in self.args:
            return self.args[option]
        return self.default(option)

    def default(self, option: str) -> Any:
        """What vLLM uses when the option is left out (serving.launch.vllm_defaults): its parser's
        default in the image's release, or for `--max-num-batched-tokens` and
        `--max-num-seqs` the value vLLM decides at start-up on this hardware; None where
        vLLM has none or it cannot be known here."""
        if option in START_UP_OPTIONS:
            length, bad = self.max_model_len()
            card = self.card
            if bad is not None or card is None or card.architecture is None:
                return None
            batched, seqs = start_up_batch_defaults(
                self.hardware,
                self.args,
                max_model_len=length or card.architecture.max_context,
                max_tokens_per_mm_item=card.max_tokens_per_mm_item,
            )
            return batched if option == "max-num-batched-tokens" else seqs
        return parser_default(option, self.image)

    def int_value(self, option: str) -> int | None:
        """An integer option, read as vLLM reads it (`32k`, `32K`)."""
        return human_int(self.value(option))

    def max_model_len(self) -> tuple[int | None, str | None]:
        """(tokens, None); (None, None) for the model's own context (absent, `auto`, `-1`);
        (None, raw) when the value is not a number vLLM accepts."""
        raw = self.args.get("max-model-len")
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in AUTO_LENGTHS):
            return None, None
        value = human_int(raw)
        return (value, None) if value is not None else (None, str(raw))

    def float_value(self, option: str) -> float | None:
        return as_float(self.value(option))

    def flag(self, option: str) -> bool:
        value = self.args.get(option)
        return value is True or (isinstance(value, str) and value.lower() == "true")


def speculative_config(args: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(config, None), (None, None) when absent, or (None, error) when it is not JSON."""
    raw = args.get("speculative-config")
    if raw is None:
        return None, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if not isinstance(raw, str):
        return None, f"--speculative-config has no value ({raw!r})"
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"--speculative-config is not valid JSON ({exc.msg} in {raw!r})"
    if not isinstance(parsed, dict):
        return None, f"--speculative-config must be a JSON object, got {raw!r}"
    return parsed, None


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
