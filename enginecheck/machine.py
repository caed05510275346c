"""Where a run ran: the CPU's model, the instruction-set flags that change what the CPU engine
can run, the cores this process may use, and the memory, so that a failure on one make of CPU
can be told from a failure of the code. Pure standard library, read from ``/proc`` (Linux;
elsewhere ``unknown``): ``scripts/machine`` prints it with the system's ``python3`` before
anything is installed.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

#: The flags (as /proc/cpuinfo names them) that decide the CPU engine's paths: AVX2 is the
#: floor of vLLM's x86 CPU build; AVX-512 (F, BF16) and AMX pick its kernel library and the
#: features it offers (vllm/platforms/cpu.py, vllm/v1/attention/backends/cpu_attn.py).
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile")
MAX_READ = 1 << 20  # /proc/cpuinfo of a 2-core machine is a few KB; a large host's < 1 MB


@dataclass(frozen=True)
class Machine:
    cpu: str
    flags: dict[str, bool]
    cores: int
    memory_gib: float | None
    arch: str

    def line(self) -> str:
        flags = " ".join(f"{name}{'+' if on else '-'}" for name, on in self.flags.items())
        memory = "unknown" if self.memory_gib is None else f"{self.memory_gib:.1f} GiB"
        return f"{self.cpu} ({self.arch}); {flags}; {self.cores} cores; {memory} memory"


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(MAX_READ)
    except OSError:
        return ""


def from_proc(cpuinfo: str, meminfo: str, cores: int, arch: str) -> Machine:
    """The machine from the text of /proc/cpuinfo and /proc/meminfo (its first processor)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    present = set(fields.get("flags", fields.get("Features", "")).split())
    memory = None
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                memory = int(parts[1]) / 1024**2  # kB -> GiB
    return Machine(
        cpu=fields.get("model name") or fields.get("Hardware") or "unknown",
        flags={name: name in present for name in FLAGS},
        cores=cores,
        memory_gib=None if memory is None else round(memory, 1),
        arch=arch,
    )


def this_machine() -> Machine:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return from_proc(
        _read("/proc/cpuinfo"), _read("/proc/meminfo"), cores or 0, platform.machine() or "?"
    )
