"""How many worker processes a cell's load gets: one per ``streams_per_worker`` streams (one
event loop keeps only so many honest: :mod:`bench.fidelity.harness` measures where), at most one
per usable CPU, one CPU left to a server on this machine (extra processes on its CPUs only move
the bottleneck).
"""

from __future__ import annotations

import ipaddress
import math
import os
from urllib.parse import urlsplit

__all__ = ["DEFAULT_STREAMS_PER_WORKER", "available_cpus", "choose_workers", "is_loopback"]

DEFAULT_STREAMS_PER_WORKER = 256


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def choose_workers(
    streams: int,
    url: str,
    *,
    streams_per_worker: int = DEFAULT_STREAMS_PER_WORKER,
    cpus: int | None = None,
) -> int:
    """Worker processes for a cell of ``streams`` streams against ``url`` (1: in-process)."""
    if streams < 1 or streams_per_worker < 1:
        raise ValueError("streams and streams_per_worker must be at least 1")
    cpus = available_cpus() if cpus is None else cpus
    usable = cpus - 1 if is_loopback(url) else cpus
    return max(1, min(usable, math.ceil(streams / streams_per_worker)))
