"""The one CPU transform: only what a CPU cannot honour changes, and it says what."""

from __future__ import annotations

import json
import shlex

import pytest

from enginecheck.transform import CpuTarget, TransformError, cpu_argv, describe
from serving.config.settings import load_settings
from serving.render.vllm import render
from tests.pulumi_harness import stack_config

TARGET = CpuTarget(model_dir="/ck/w4a16", port=18000, kv_cache_bytes=1 << 29, drafter_dir="/ck/mtp")
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
