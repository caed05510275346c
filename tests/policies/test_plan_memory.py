"""The planner's memory maths against published vLLM start-up logs, and against the catalog.

Every figure below is copied from a public log, cited by URL; the architectures are the
models' published `config.json` values (not in the project catalog, which holds Gemma 4 only).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from serving.catalog.hardware import HARDWARE
from serving.catalog.models import MODELS, Architecture, Attention
from serving.sizing.memory import (
    DEFAULT_PROFILE,
    GIB,
    cost_per_million_requests,
    decode_ceiling_tokens_per_s,
    kv_capacity,
    kv_dtype_bytes,
    kv_layout,
    monthly_cost,
    plan_memory,
)

#: vLLM's V0 engine (<= 0.7), which these logs come from: CUDA graphs were captured after the
#: KV cache was sized.
V0_PROFILE = replace(DEFAULT_PROFILE, cuda_graph_bytes=0, label="vLLM V0 (graphs not profiled)")

# config.json: 32 layers, 8 KV heads, head_dim 128, hidden 4096.
LLAMA_3_1_8B = Architecture(
    hidden_size=4096,
    vocab_size=128_256,
    attention=(Attention(layers=32, kv_heads=8, head_dim=128),),
    max_context=131_072,
    source="meta-llama/Llama-3.1-8B-Instruct config.json",
)
# config.json: 40 layers, 8 KV heads, head_dim 128, hidden 5120.
QWEN3_14B = Architecture(
    hidden_size=5120,
    vocab_size=151_936,
    attention=(Attention(layers=40, kv_heads=8, head_dim=128),),
    max_context=40_960,
    source="Qwen/Qwen3-14B config.json",
)
# config.json: 94 layers, 4 KV heads, head_dim 128, hidden 4096.
QWEN3_235B_A22B = Architecture(
    hidden_size=4096,
    vocab_size=151_936,
    attention=(Attention(layers=94, kv_heads=4, head_dim=128),),
    max_context=40_960,
    source="Qwen/Qwen3-235B-A22B-FP8 config.json",
)
# config.json: 34 layers, sliding_window_pattern 6 (29 sliding at window 1024, 5 full),
# 4 KV heads, head_dim 256, hidden 2560.
GEMMA_3_4B = Architecture(
    hidden_size=2560,
    vocab_size=262_208,
    attention=(
        Attention(layers=29, kv_heads=4, head_dim=256, window=1024),
        Attention(layers=5, kv_heads=4, head_dim=256),
    ),
    max_context=131_072,
    source="google/gemma-3-4b-it config.json",
)

TOLERANCE = 0.10


def within(predicted: float, logged: float, tolerance: float = TOLERANCE) -> bool:
    return abs(predicted - logged) <= tolerance * logged


# https://github.com/vllm-project/vllm/issues/10517 (comment by kaspersiminski, 2024-12-02):
# Llama-3.1-8B-Instruct on an RTX 3090, vLLM 0.6 (V0 engine), bf16 KV cache,
# gpu_memory_utilization=0.90, "Loading model weights took 14.9888 GB" (vLLM prints GiB),
# "total_gpu_memory=23.58GiB". Without chunked prefill V0 profiles max_model_len tokens.
#   max_model_len 20000: "# GPU blocks: 1952" (x16 = 31,232 tokens),
#                        "Maximum concurrency for 20000 tokens per request: 1.56x"
#   max_model_len 29000: "maximum number of tokens that can be stored in KV cache (23648)",
#                        "Maximum concurrency for 29000 tokens per request: 0.82x" (refused)
# The activation constant (26.8 bytes per token per hidden unit) was derived from this same
# log's profile lines (peak torch memory minus weights), so this checks the whole chain of
# weights, reserve, paging and block maths, not an independent activation estimate; the
# paging maths is checked independently below.
@pytest.mark.parametrize(
    ("max_model_len", "logged_tokens", "logged_concurrency"),
    [(20_000, 31_232, 1.56), (29_000, 23_648, 0.82)],
)
def test_kv_capacity_matches_llama_8b_on_rtx3090(
    max_model_len: int, logged_tokens: int, logged_concurrency: float
) -> None:
    plan = plan_memory(
        LLAMA_3_1_8B,
        weight_bytes=int(14.9888 * GIB),
        device_bytes=int(23.58 * GIB),
        utilization=0.90,
        max_model_len=max_model_len,
        max_num_batched_tokens=max_model_len,
        kv_cache_dtype="auto",
        profile=V0_PROFILE,
    )
    assert within(plan.capacity.pool_tokens, logged_tokens)
    assert within(plan.capacity.reported_tokens, logged_tokens)
    assert within(plan.capacity.max_concurrency, logged_concurrency)
    # vLLM started at 20000 and refused 29000; the planner agrees.
    assert plan.fits is (logged_concurrency >= 1)


# https://github.com/LMCache/LMCache/issues/1739 (Qwen3-14B, one GPU, bf16 KV):
#   "Available KV cache memory: 6.51 GiB", "GPU KV cache size: 42,656 tokens",
#   "Maximum concurrency for 32,768 tokens per request: 1.30x"
# https://github.com/vllm-project/vllm/issues/21348 (Qwen3-235B-A22B-FP8, 4x H100, TP 4):
#   "Available KV cache memory: 8.11 GiB", "GPU KV cache size: 178,880 tokens"
@pytest.mark.parametrize(
    ("arch", "tp", "available_gib", "max_model_len", "logged_tokens", "logged_concurrency"),
    [
        (QWEN3_14B, 1, 6.51, 32_768, 42_656, 1.30),
        (QWEN3_235B_A22B, 4, 8.11, 40_960, 178_880, None),
    ],
    ids=["qwen3-14b", "qwen3-235b-tp4"],
)
def test_kv_tokens_from_available_memory_match_v1_logs(
    arch: Architecture,
    tp: int,
    available_gib: float,
    max_model_len: int,
    logged_tokens: int,
    logged_concurrency: float | None,
) -> None:
    layout = kv_layout(arch, kv_dtype_bytes("auto"), tensor_parallel=tp)
    capacity = kv_capacity(layout, available_gib * GIB, max_model_len, 8192)
    assert within(capacity.pool_tokens, logged_tokens, 0.02)
    if logged_concurrency is not None:
        assert within(capacity.max_concurrency, logged_concurrency, 0.02)


# https://github.com/ovg-project/kvcached/issues/215 (google/gemma-3-4b-it on an A100, vLLM 0.11):
#   "Add 1 padding layers, may waste at most 3.45% KV cache memory",
#   "GPU KV cache size: 317,136 tokens",
#   "Maximum concurrency for 3,072 tokens per request: 102.78x"
# The hybrid grouping (29 sliding layers in six groups of five, one padded, plus one group of
# five full layers), and the sliding layers' window-capped blocks, reproduce the concurrency
# from the block count the token figure implies.
def test_hybrid_grouping_matches_gemma3_log() -> None:
    layout = kv_layout(GEMMA_3_4B, kv_dtype_bytes("auto"))
    assert len(layout.groups) == 7
    assert layout.group_size == 5
    padded = layout.group_size * 6 - 29
    assert padded == 1
    num_blocks = 317_136 // layout.min_block_size * len(layout.groups)
    capacity = kv_capacity(layout, num_blocks * layout.page_bytes * layout.group_size, 3072, 2048)
    assert capacity.pool_tokens == 317_136
    assert within(capacity.max_concurrency, 102.78, 0.01)


def test_gemma4_kv_per_token_matches_the_reference_notes() -> None:
    arch = MODELS["google/gemma-4-12B-it-qat-w4a16-ct"].architecture
    assert arch is not None
    bf16 = kv_dtype_bytes("bfloat16")
    sliding, full = arch.attention
    assert sliding.layers * 2 * sliding.kv_heads * sliding.head_dim * bf16 == 320 * 1024
    assert full.layers * 2 * full.kv_heads * full.head_dim * bf16 == 16 * 1024


def test_gemma4_layout_groups_like_vllm() -> None:
    arch = MODELS["google/gemma-4-12B-it-qat-w4a16-ct"].architecture
    assert arch is not None
    layout = kv_layout(arch, kv_dtype_bytes("fp8"))
    # 40 sliding layers in five groups of eight, eight full layers in one; the full layers'
    # smaller pages get a 4x larger block so every page is the same size.
    assert [g.layers for g in layout.groups] == [8, 8, 8, 8, 8, 8]
    assert {g.block_size for g in layout.groups} == {16, 64}
    assert layout.page_bytes == 16 * 2 * 8 * 256


def test_l4_stack_fits_and_bf16_does_not() -> None:
    l4 = HARDWARE["l4"]
    qat = MODELS["google/gemma-4-12B-it-qat-w4a16-ct"]
    bf16 = MODELS["google/gemma-4-12B-it"]
    assert qat.architecture is not None
    common = {
        "device_bytes": l4.memory_bytes,
        "utilization": 0.95,
        "max_model_len": 32_768,
        "max_num_batched_tokens": 8192,
        "kv_cache_dtype": "fp8",
    }
    good = plan_memory(qat.architecture, weight_bytes=qat.weight_bytes, **common)  # type: ignore[arg-type]
    assert good.fits
    assert good.capacity.max_concurrency > 4
    bad = plan_memory(qat.architecture, weight_bytes=bf16.weight_bytes, **common)  # type: ignore[arg-type]
    assert not bad.fits
    assert bad.kv_available_bytes < 0


def test_decode_ceiling_and_costs() -> None:
    assert decode_ceiling_tokens_per_s(300e9, 6 * 10**9) == pytest.approx(50.0)
    assert cost_per_million_requests(3.6, 1.0) == pytest.approx(1000.0)
    assert monthly_cost(1.0, 2) == pytest.approx(1460.0)
    with pytest.raises(ValueError, match="positive"):
        cost_per_million_requests(1.0, 0)
    with pytest.raises(ValueError, match="allowed: auto"):
        kv_dtype_bytes("int3")
    with pytest.raises(ValueError, match="utilization"):
        plan_memory(
            LLAMA_3_1_8B,
            weight_bytes=1,
            device_bytes=1,
            utilization=1.5,
            max_model_len=1,
            max_num_batched_tokens=1,
        )
