"""Every vLLM metric this package uses, against what a real server exports. Pure.

The names used are read from what the package deploys (the resources ``gemma4 preview --json``
shows: dashboards, alert policies, the HPA, the endpoint picker's and the sidecar's configs),
not from a list kept by hand; the labels each family carries come from the extraction from
vLLM's source (``tests/data/vllm-<version>-metrics.json``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["exported", "problems", "used_names"]

_NAME = re.compile(r"vllm:[a-zA-Z_][a-zA-Z0-9_]*")
#: Suffixes a Prometheus family's samples (and PromQL queries) add to the family's name.
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")
#: Names the package reads only as a documented fallback for an older vLLM: not exported by
#: the pinned release, and not expected to be (``vllm:kv_cache_usage_perc`` replaced it).
FALLBACKS = frozenset({"vllm:gpu_cache_usage_perc"})


def used_names(document: Any) -> set[str]:
    """Every ``vllm:...`` name in a JSON document (strings and keys, at any depth; a name may
    be written with ``_`` for ``:`` as Cloud Monitoring's Prometheus names are not, so only the
    ``vllm:`` spelling counts)."""
    return set(_NAME.findall(json.dumps(document, default=str)))


def exported(exposition: str) -> dict[str, set[str]]:
    """``{family or sample name: label names}`` of a Prometheus text body: each family under
    its name and under every sample name it has (``..._bucket``, ``..._total``)."""
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(exposition):
        labels: set[str] = set()
        for sample in family.samples:
            names = set(sample.labels) - {"le", "quantile"}
            labels |= names
            out.setdefault(sample.name, set()).update(names)
        out.setdefault(family.name, set()).update(labels)
    return out


def _family(name: str, families: Mapping[str, Any]) -> str:
    if name in families:
        return name
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            return name[: -len(suffix)]
    return name


def problems(
    used: Iterable[str],
    exposition: str,
    families: Mapping[str, Mapping[str, Any]],
    *,
    optional: Iterable[str] = (),
) -> list[str]:
    """What does not hold, one sentence each: a name used that the server does not export (an
    ``optional`` one, e.g. spec-decode counters on a server without a drafter, only when the
    server exports none of its family's names), a family whose exported labels lack one the
    source extraction lists, and a used name the extraction does not know."""
    real = exported(exposition)
    optional_set = set(optional)
    out: list[str] = []
    for name in sorted(set(used) - FALLBACKS):
        family = _family(name, families)
        if name not in real and family not in real:
            if name in optional_set or family in optional_set:
                continue
            out.append(f"{name}: used by this package, not in the real server's /metrics")
            continue
        if family not in families:
            out.append(f"{name}: exported, but not in the source extraction of vLLM's metrics")
            continue
        wanted = set(families[family].get("labels", []))
        have = real.get(family, set()) | real.get(name, set())
        missing = wanted - have
        if missing:
            out.append(
                f"{family}: the real server's samples lack label(s) {sorted(missing)} that "
                f"vLLM's source (and this package's queries) expect; it has {sorted(have)}"
            )
    return out
