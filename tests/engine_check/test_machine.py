"""Where a run ran (enginecheck.machine): read from /proc the way both kinds of CPU write it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from enginecheck.machine import from_proc

ROOT = Path(__file__).resolve().parents[2]
#: /proc/cpuinfo's first block on an AMD EPYC without AVX-512 (Zen 2, as the report that found
#: the engine failing had) and on an Intel Xeon with AVX-512 and AMX (Sapphire Rapids); the
#: flag lists are cut to what matters and some neighbours.
ZEN2 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B12
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 sha_ni clwb

processor\t: 1
model name\t: something else
flags\t\t: avx512f
"""
SPR = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu avx avx2 avx512f avx512dq avx512_bf16 avx512_vnni amx_bf16 amx_tile amx_int8
"""
MEMINFO = "MemTotal:       24634096 kB\nMemFree:        1 kB\n"


def test_an_avx2_only_amd_and_an_amx_intel_are_told_apart() -> None:
    amd = from_proc(ZEN2, MEMINFO, 2, "x86_64")
    intel = from_proc(SPR, MEMINFO, 2, "x86_64")
    assert amd.cpu == "AMD EPYC 7B12"
    assert amd.flags == {"avx2": True, "avx512f": False, "avx512_bf16": False, "amx_tile": False}
    assert intel.flags == {"avx2": True, "avx512f": True, "avx512_bf16": True, "amx_tile": True}
    assert amd.line() == (
        "AMD EPYC 7B12 (x86_64); avx2+ avx512f- avx512_bf16- amx_tile-; 2 cores; 23.5 GiB memory"
    )


def test_what_cannot_be_read_says_unknown() -> None:
    machine = from_proc("", "", 0, "aarch64")
    assert machine.cpu == "unknown" and machine.memory_gib is None
    assert "unknown memory" in machine.line()


def test_the_command_runs_with_the_system_python_and_nothing_installed() -> None:
    """.ci/run prints it first, before scripts/setup: only the standard library."""
    done = subprocess.run(
        [sys.executable, "-S", str(ROOT / "scripts" / "machine"), "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    doc = json.loads(done.stdout)
    assert set(doc) == {"cpu", "flags", "cores", "memory_gib", "arch"}
    assert set(doc["flags"]) == {"avx2", "avx512f", "avx512_bf16", "amx_tile"}


def test_the_isa_mask_shows_the_engine_a_cpu_without_avx512_and_amx(tmp_path: Path) -> None:
    """enginecheck/isa_mask (engine-check --isa avx2) wraps torch.cpu.get_capabilities, which
    every torch.cpu._is_* check vLLM reads goes through; here on a stand-in torch package of
    that shape, in a fresh interpreter as the engine's processes start."""
    cpu = tmp_path / "torch" / "cpu"
    cpu.mkdir(parents=True)
    (tmp_path / "torch" / "__init__.py").write_text("")
    (cpu / "__init__.py").write_text(
        "def get_capabilities():\n"
        "    return {'avx2': True, 'avx512_f': True, 'avx512_bf16': True, 'amx_tile': True}\n"
        "def _is_avx512_supported():\n"
        "    return get_capabilities().get('avx512_f', False)\n"
    )
    probe = "import torch.cpu as c; print(c._is_avx512_supported(), dict(c.get_capabilities()))"
    mask = ROOT / "enginecheck" / "isa_mask"
    out = {}
    for isa in ("avx2", "native"):
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True,
            env={"PYTHONPATH": f"{mask}:{tmp_path}", "GEMMA4_ENGINE_ISA": isa},
        )  # fmt: skip
        out[isa] = done.stdout.strip()
    assert out["avx2"] == (
        "False {'avx2': True, 'avx512_f': False, 'avx512_bf16': False, 'amx_tile': False}"
    )
    assert out["native"].startswith("True {'avx2': True, 'avx512_f': True")
