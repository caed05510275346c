"""Device-memory and capacity maths for one vLLM instance (no Pulumi import).

This models what vLLM does at start-up, so that a bad configuration is refused at preview time
instead of after a ten-minute cold start:

1. ``budget = gpu_memory_utilization x device memory``.
2. vLLM loads the weights (target and, with MTP, the drafter), then profiles one forward pass of
   ``max_num_batched_tokens`` tokens. What is left for the KV cache is
   ``budget - weights - activation peak - non-torch memory - CUDA graph memory``
   (CUDA graph memory is profiled and subtracted by default since vLLM v0.21.0; before that it
   came out of the ``1 - utilization`` headroom).
3. The KV cache is paged. Per layer and token a block holds ``2 x KV heads x head dim x dtype
   bytes`` (keys and values; the heads are those on one device under tensor parallelism). Layers
   are grouped the way vLLM's ``kv_cache_utils`` does for hybrid (sliding + full) models: layers of
   one kind are split into groups of ``group_size`` layers (the smaller kind's layer count, or the
   larger one's when they are within 25% of each other), all groups share ``group_size`` memory
   pools of equal page size, and smaller pages are made equal by giving that kind a larger block.
4. One request needs, per group, ``cdiv(max_model_len, block)`` blocks for full attention, and
   ``cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block) + 1`` for sliding
   windows. ``Maximum concurrency for N tokens per request`` is ``num_blocks / blocks per
   request``; recent vLLM prints ``GPU KV cache size`` as ``concurrency x max_model_len`` tokens
   (older releases printed ``num_blocks // groups x block``, identical for single-group models).
   vLLM refuses to start when concurrency is below one ("To serve at least one request with the
   models's max seq len ... KV cache is needed, which is larger than the available KV cache
   memory") or no memory is left ("No available memory for the cache blocks").
   Sources: vLLM's `v1/core/kv_cache_utils.py` as described in the reference notes; the grouping
   and the sliding layers' extra block reproduce the "Add 1 padding layers" and "Maximum
   concurrency ... 102.78x" lines of ovg-project/kvcached issue 215 (Gemma 3 4B); the newer
   token figure is described in MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks pull request 94.

The runtime constants in :class:`RuntimeProfile` are estimates, each with its source; the test
suite (``tests/policies/test_plan_memory.py``) holds the result within 10% of published start-up
logs. Keys-equal-values layers (Gemma 4 global layers) are counted with separate K and V, as the
reference notes' figures do; that is the conservative reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import ceil

from serving.catalog.models import KV_DTYPE_BYTES, Architecture, Attention

GIB = 1024**3
HOURS_PER_MONTH = 730.0


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype: str = "bfloat16") -> int:
    """Bytes per KV element; `auto` uses the activation dtype (bf16 unless told otherwise)."""
    name = model_dtype if kv_cache_dtype in ("auto", "") else kv_cache_dtype
    if name == "auto":
        name = "bfloat16"
    try:
        return KV_DTYPE_BYTES[name]
    except KeyError:
        allowed = ", ".join(["auto", *sorted(KV_DTYPE_BYTES)])
        raise ValueError(f"unknown KV cache dtype {name!r}; allowed: {allowed}") from None


@dataclass(frozen=True)
class RuntimeProfile:
    """What vLLM's memory profile subtracts besides weights and KV cache, with sources."""

    #: Activation peak per batched token and per hidden unit, bytes. Source: vllm-project/vllm
    #: issue 10517 (Llama-3.1-8B, RTX 3090, vLLM 0.6): peak torch memory minus weights is
    #: 2.07 GiB at 20,000 batched tokens and 2.99 GiB at 29,000, i.e. 26.8 bytes per token per
    #: hidden unit (4096) with no fixed part. It scales with the MLP width, which the catalog
    #: does not record; models with a wider MLP than Llama's 3.5x hidden need more.
    activation_bytes_per_token_hidden: float = 26.8
    #: Memory outside torch's allocator (CUDA context, cuBLAS/NCCL workspaces). Logs show
    #: 0.20-0.35 GiB on 24 GB GPUs (vllm issues 10517, 13061, PR 14447); the largest is used.
    non_torch_bytes: int = int(0.35 * GIB)
    #: CUDA graph memory, subtracted before the KV cache since vLLM v0.21.0 (vllm issue 46462's
    #: log: "CUDA graph memory profiling is enabled (default since v0.21.0)"). Estimate for a
    #: dense model with a small `max-num-seqs`: vllm issue 7553 measured 2.4 GiB for 67 capture
    #: sizes of a 34B model; a handful of sizes take well under 1 GiB.
    cuda_graph_bytes: int = 1 * GIB
    #: Tokens per KV block (vLLM's default on CUDA).
    block_size: int = 16
    #: Which vLLM behaviour this profile models (for messages).
    label: str = "vLLM >= 0.21 (CUDA graphs profiled)"


#: The default: the image this project pins is well past v0.21.
DEFAULT_PROFILE = RuntimeProfile()
#: TPUs capture no CUDA graphs; the other constants are the GPU ones (not checked on TPU logs).
TPU_PROFILE = replace(
    DEFAULT_PROFILE, cuda_graph_bytes=0, label="TPU: GPU constants without CUDA graphs (unverified)"
)


@dataclass(frozen=True)
class KvGroup:
    """One KV cache group: `layers` layers of one attention kind sharing a block table."""

    attention: Attention
    layers: int
    block_size: int


@dataclass(frozen=True)
class KvLayout:
    """How vLLM lays the KV cache out for an architecture, dtype and tensor-parallel size."""

    groups: tuple[KvGroup, ...]
    #: Layers per group = number of shared memory pools.
    group_size: int
    #: Bytes of one block of one layer (uniform across groups).
    page_bytes: int

    @property
    def min_block_size(self) -> int:
        return min(g.block_size for g in self.groups)

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """Blocks one full-length request holds across all groups."""
        total = 0
        for g in self.groups:
            window = g.attention.window
            if window is None:
                total += ceil(max_model_len / g.block_size)
            else:
                tokens = min(window - 1 + max_num_batched_tokens, max_model_len)
                total += ceil(tokens / g.block_size) + 1
        return total


def kv_bytes_per_token_per_layer(
    attention: Attention, dtype_bytes: int, tensor_parallel: int = 1
) -> int:
    """2 (K and V) x KV heads x head dim x dtype bytes, for one layer on one device (the heads
    are split across devices, replicated when fewer)."""
    heads = max(1, attention.kv_heads // tensor_parallel)
    return 2 * heads * attention.head_dim * dtype_bytes


def kv_layout(
    arch: Architecture,
    dtype_bytes: int,
    tensor_parallel: int = 1,
    block_size: int = DEFAULT_PROFILE.block_size,
) -> KvLayout:
    """Group layers and unify page sizes as vLLM's `kv_cache_utils` does."""
    kinds = [a for a in arch.attention if a.layers > 0]
    if not kinds:
        raise ValueError("architecture has no attention layers")
    per_token = [kv_bytes_per_token_per_layer(a, dtype_bytes, tensor_parallel) for a in kinds]
    page = max(block_size * b for b in per_token)
    if len(kinds) == 1:
        group_size = kinds[0].layers
    else:
        fewest, most = min(a.layers for a in kinds), max(a.layers for a in kinds)
        group_size = most if most < fewest * 1.25 else fewest
    groups: list[KvGroup] = []
    for attention, bytes_per_token in zip(kinds, per_token, strict=True):
        kind_block = page // bytes_per_token
        remaining = attention.layers
        while remaining > 0:
            groups.append(KvGroup(attention, min(group_size, remaining), kind_block))
            remaining -= group_size
    return KvLayout(groups=tuple(groups), group_size=group_size, page_bytes=page)


@dataclass(frozen=True)
class KvCapacity:
    """What vLLM's KV cache holds for a given amount of memory."""

    num_blocks: int
    blocks_per_request: int
    #: "Maximum concurrency for <max_model_len> tokens per request".
    max_concurrency: float
    #: "GPU KV cache size: N tokens" as recent vLLM prints it (concurrency x max_model_len).
    reported_tokens: int
    #: The same line as vLLM <= 0.11 printed it (num_blocks // groups x smallest block).
    pool_tokens: int


def kv_capacity(
    layout: KvLayout, available_bytes: float, max_model_len: int, max_num_batched_tokens: int
) -> KvCapacity:
    """Blocks, concurrency and token figures for `available_bytes` of KV cache memory."""
    num_blocks = max(0, int(available_bytes // (layout.page_bytes * layout.group_size)))
    per_request = layout.blocks_per_request(max_model_len, max_num_batched_tokens)
    concurrency = num_blocks / per_request
    return KvCapacity(
        num_blocks=num_blocks,
        blocks_per_request=per_request,
        max_concurrency=concurrency,
        reported_tokens=int(concurrency * max_model_len),
        pool_tokens=num_blocks // len(layout.groups) * layout.min_block_size,
    )


def activation_bytes(
    arch: Architecture, max_num_batched_tokens: int, profile: RuntimeProfile = DEFAULT_PROFILE
) -> int:
    """Estimated activation peak of vLLM's profiling pass."""
    return int(
        profile.activation_bytes_per_token_hidden * arch.hidden_size * max_num_batched_tokens
    )


@dataclass(frozen=True)
class MemoryPlan:
    """The memory budget of one vLLM instance, term by term, and what the KV cache holds."""

    device_bytes: int
    utilization: float
    budget_bytes: float
    weight_bytes: int
    drafter_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    kv_available_bytes: float
    #: KV bytes per token while a sequence is shorter than the sliding window (all layers).
    kv_bytes_per_token: int
    #: KV bytes per token past the window (full-attention layers only).
    kv_bytes_per_token_full_layers: int
    #: KV bytes one full-length sequence holds (what vLLM requires at least once).
    one_sequence_kv_bytes: int
    max_model_len: int
    capacity: KvCapacity
    profile: RuntimeProfile = field(default=DEFAULT_PROFILE)

    @property
    def runtime_reserve_bytes(self) -> int:
        return self.activation_bytes + self.non_torch_bytes + self.cuda_graph_bytes

    @property
    def required_bytes(self) -> float:
        """Weights + drafter + reserve + one full-length sequence of KV cache."""
        return (
            self.weight_bytes
            + self.drafter_bytes
            + self.runtime_reserve_bytes
            + self.one_sequence_kv_bytes
        )

    @property
    def fits(self) -> bool:
        return self.capacity.max_concurrency >= 1.0


def plan_memory(
    arch: Architecture,
    *,
    weight_bytes: int,
    device_bytes: int,
    utilization: float,
    max_model_len: int,
    max_num_batched_tokens: int,
    kv_cache_dtype: str = "auto",
    model_dtype: str = "bfloat16",
    drafter_bytes: int = 0,
    tensor_parallel: int = 1,
    profile: RuntimeProfile = DEFAULT_PROFILE,
) -> MemoryPlan:
    """Model vLLM's start-up memory accounting for one device."""
    if not 0 < utilization <= 1:
        raise ValueError(f"utilization must be in (0, 1], got {utilization}")
    dtype_bytes = kv_dtype_bytes(kv_cache_dtype, model_dtype)
    budget = utilization * device_bytes
    activation = activation_bytes(arch, max_num_batched_tokens, profile)
    available = (
        budget
        - weight_bytes
        - drafter_bytes
        - activation
        - profile.non_torch_bytes
        - profile.cuda_graph_bytes
    )
    layout = kv_layout(arch, dtype_bytes, tensor_parallel, profile.block_size)
    capacity = kv_capacity(layout, max(0.0, available), max_model_len, max_num_batched_tokens)
    per_token = [
        (a.window, a.layers * kv_bytes_per_token_per_layer(a, dtype_bytes, tensor_parallel))
        for a in arch.attention
    ]
    one_sequence = (
        layout.blocks_per_request(max_model_len, max_num_batched_tokens)
        * layout.page_bytes
        * layout.group_size
    )
    return MemoryPlan(
        device_bytes=device_bytes,
        utilization=utilization,
        budget_bytes=budget,
        weight_bytes=weight_bytes,
        drafter_bytes=drafter_bytes,
        activation_bytes=activation,
        non_torch_bytes=profile.non_torch_bytes,
        cuda_graph_bytes=profile.cuda_graph_bytes,
        kv_available_bytes=available,
        kv_bytes_per_token=sum(b for _, b in per_token),
        kv_bytes_per_token_full_layers=sum(b for window, b in per_token if window is None),
        one_sequence_kv_bytes=one_sequence,
        max_model_len=max_model_len,
        capacity=capacity,
        profile=profile,
    )


def decode_ceiling_tokens_per_s(
    bandwidth_bytes_per_s: float, weight_bytes: int, context_kv_bytes: int = 0
) -> float:
    """Batch-1 decode upper bound: every step reads the weights (and the context's KV) once."""
    return bandwidth_bytes_per_s / (weight_bytes + context_kv_bytes)


def cost_per_million_requests(usd_per_hour: float, requests_per_second: float) -> float:
    """USD per million requests for one instance serving `requests_per_second` on average."""
    if requests_per_second <= 0:
        raise ValueError("requests_per_second must be positive")
    return usd_per_hour / (requests_per_second * 3600.0) * 1e6


def monthly_cost(usd_per_hour: float, instances: int = 1, hours: float = HOURS_PER_MONTH) -> float:
    """USD for `instances` instances billed `hours` a month (default: all month, 730 hours;
    a flex-start TPU node bills its run duration, see `Settings.billed_hours_per_month`)."""
    return usd_per_hour * min(hours, HOURS_PER_MONTH) * instances
