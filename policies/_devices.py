"""How many accelerator devices a resource gives one vLLM server, read from the resource.

The count is what the resource itself says, with where it said it: a container's
`nvidia.com/gpu` or `google.com/tpu` limit (Cloud Run, GKE), or a TPU VM's accelerator type
per Google's TPU naming (`v5litepod-N`, `v5e-N`, `v6e-N`: N chips; `v4-N`, `v5p-N`: N
TensorCores, two per chip), single-host slices only (a larger slice runs a server per host).
Unknown: None, with why; a server asking for more than one device is then refused (fail
closed), never compared with a guessed 1.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from policies._k8s import tpu_chips
from policies._props import get, read_field

#: Kubernetes' extended resources for accelerators.
_K8S_DEVICE_RESOURCES = ("nvidia.com/gpu", "google.com/tpu")
#: Single-host TPU slices: chips per name's number (v5e and v6e: chips; v4 and v5p: cores).
_TPU_SINGLE_HOST = {"v5litepod": (1, 8), "v5e": (1, 8), "v6e": (1, 8), "v4": (2, 8), "v5p": (2, 8)}

Count = tuple[int | None, str]


def whole(value: Any) -> int | None:
    """A positive whole number as a resource quantity or count gives it (`2`, `"2"`)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float) and value.is_integer() and value > 0:
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"[1-9][0-9]{0,3}", value.strip()):
        return int(value.strip())
    return None


def tpu_type_chips(name: str | None) -> int | None:
    """The chips of a single-host TPU accelerator type (`v6e-4`: 4, `v4-8`: 4), else None."""
    match = re.fullmatch(r"(v\d+[a-z]*)-(\d{1,5})", name or "")
    if match is None or match.group(1) not in _TPU_SINGLE_HOST:
        return None
    per_chip, most = _TPU_SINGLE_HOST[match.group(1)]
    number = int(match.group(2))
    chips, rest = divmod(number, per_chip)
    return chips if rest == 0 and 0 < chips <= most else None


def container_count(container: Any, where: str) -> Count:
    """A container's accelerator limit (Cloud Run, Kubernetes)."""
    for section in ("limits", "requests"):
        for resource in _K8S_DEVICE_RESOURCES:
            resources, unknown = read_field(container, "resources")
            if not unknown:
                held, unknown = read_field(resources, section)
            if not unknown:
                value, unknown = read_field(held, resource)
            if unknown:
                return None, f"{where} resources.{section} is not known at preview"
            if value is None:
                continue
            count = whole(value)
            source = f"{where} resources.{section}[{resource!r}] = {value!r}"
            return (count, source) if count is not None else (None, source + " (not a count)")
    return None, f"{where} declares no nvidia.com/gpu or google.com/tpu limit"


def machine_count(resource_type: str, props: Mapping[str, Any], accelerator: str | None) -> Count:
    """A TPU VM's devices, from what it declares."""
    topology = get(props, "acceleratorConfig", "topology")
    if accelerator is None and isinstance(topology, str):
        chips = tpu_chips(topology.lower())
        if chips and chips <= 8:
            return chips, f"acceleratorConfig.topology {topology}"
        return None, f"acceleratorConfig.topology {topology!r} is not a single-host slice"
    named = tpu_type_chips(accelerator)
    if named is not None:
        return named, f"accelerator type {accelerator} ({named} TPU chips)"
    if accelerator:
        return None, f"accelerator type {accelerator!r} names no single-host chip count known here"
    return None, f"this {resource_type.rsplit(':', 1)[-1]} declares no accelerator count"
