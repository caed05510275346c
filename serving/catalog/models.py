"""Model catalog: checkpoints this project serves, with the figures memory maths needs.

Architecture figures for Gemma 4 12B come from transformers' Gemma 4 conversion script as
summarised in the project's reference notes (48 layers, [5 sliding, 1 full] x 8); sizes of the
checkpoints are those the seed deployments report. Each entry names its source.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

#: Bytes per KV element for vLLM's `--kv-cache-dtype` values ("auto" follows the model dtype).
KV_DTYPE_BYTES: dict[str, int] = {
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
}


class Quantization(StrEnum):
    NONE = "none"
    #: 4-bit weights, 16-bit activations, compressed-tensors format (vLLM `compressed-tensors`).
    W4A16_COMPRESSED_TENSORS = "compressed-tensors"


class Role(StrEnum):
    TARGET = "target"
    #: An MTP assistant (drafter) that shares the target's KV cache.
    DRAFTER = "drafter"


@dataclass(frozen=True)
class Attention:
    """One kind of attention layer and its KV footprint."""

    layers: int
    kv_heads: int
    head_dim: int
    #: Sliding window in tokens; None for full attention.
    window: int | None = None
    #: Keys and values are the same tensor (Gemma 4 global layers).
    keys_equal_values: bool = False


@dataclass(frozen=True)
class Architecture:
    hidden_size: int
    vocab_size: int
    attention: tuple[Attention, ...]
    #: Longest context the model supports (max-model-len upper bound).
    max_context: int
    source: str


@dataclass(frozen=True)
class ModelCard:
    repo_id: str
    role: Role
    quantization: Quantization
    #: Trained with quantization-aware training (safe to serve at 4 bits).
    qat: bool
    #: Bytes the weights take in device memory once loaded.
    weight_bytes: int
    weight_source: str
    params_billions: float
    architecture: Architecture | None
    #: For a target: the repo id of its MTP assistant, if one exists.
    assistant: str | None = None
    #: vLLM `--tool-call-parser` and `--reasoning-parser` values for this family.
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    #: vLLM's `max_tokens_per_mm_item` for this checkpoint (the largest image, in tokens):
    #: 2496 for Gemma 4, as vLLM printed it when it refused the reference L4 deployment
    #: ("Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger than
    #: max_num_batched_tokens (2048)"). None where unknown or the model takes no images.
    max_tokens_per_mm_item: int | None = None
    #: A multimodal model with bidirectional (prefix-LM) attention over its images
    #: (vLLM's `is_mm_prefix_lm`; Gemma 4). vLLM 0.27.1 then forces chunked multimodal input
    #: off on CUDA (`vllm/platforms/cuda.py`: "Forcing --disable_chunked_mm_input for models
    #: with multimodal-bidirectional attention."); the TPU platform forces it off for every
    #: multimodal model.
    mm_prefix_lm: bool = False

    @property
    def multimodal(self) -> bool:
        """The model takes images (the catalogue knows its largest item)."""
        return self.max_tokens_per_mm_item is not None

    def chunked_mm_input_forced_off(self, tpu: bool | None) -> bool:
        """vLLM 0.27.1 disables chunked multimodal input for this model whatever the flags
        say: a multimodal prefix-LM model on any platform, any multimodal model on a TPU
        (`tpu` None: the platform is not known, so it may be a TPU)."""
        return self.multimodal and (self.mm_prefix_lm or tpu is not False)

    @property
    def folder(self) -> str:
        """Folder name of the checkpoint inside the model bucket (the repo's own name)."""
        return self.repo_id.rsplit("/", 1)[-1]


GB = 10**9
GIB = 1024**3

GEMMA4_12B = Architecture(
    hidden_size=3840,
    vocab_size=262_144,
    attention=(
        Attention(layers=40, kv_heads=8, head_dim=256, window=1024),
        Attention(layers=8, kv_heads=1, head_dim=512, keys_equal_values=True),
    ),
    max_context=131_072,
    source="transformers Gemma 4 conversion script (reference notes); 131072 is the context "
    "the reference RTX PRO 6000 deployment serves",
)

#: The QAT w4a16 checkpoint the stacks serve; the bf16 one is the same model unquantized.
_QAT = ModelCard(
    repo_id="google/gemma-4-12B-it-qat-w4a16-ct",
    role=Role.TARGET,
    quantization=Quantization.W4A16_COMPRESSED_TENSORS,
    qat=True,
    # vLLM's own figure once loaded, not the seed article's "~6 GB" (which counted the
    # 4-bit layers only): the embeddings (tied with the output layer), norms and the
    # vision tower stay bf16. The safetensors on disk are larger (9.56 GiB, 10.3 GB:
    # the tied table is stored apart from the vision tower's own copies).
    weight_bytes=int(8.28 * GIB),
    weight_source="vLLM 'Model loading took 8.28 GiB' for this checkpoint (public "
    "load logs: vllm/vllm-openai gemma4 image on an RTX 3090, 2026-06-11, and a Modal "
    "A10 boot, 2026-08-28; the same figure in both); on disk 9.56 GiB of safetensors",
    params_billions=12.0,
    architecture=GEMMA4_12B,
    assistant="google/gemma-4-12B-it-assistant",
    tool_call_parser="gemma4",
    reasoning_parser="gemma4",
    max_tokens_per_mm_item=2496,
    mm_prefix_lm=True,
)

MODELS: dict[str, ModelCard] = {
    card.repo_id: card
    for card in (
        _QAT,
        replace(
            _QAT,
            repo_id="google/gemma-4-12B-it",
            quantization=Quantization.NONE,
            qat=False,
            weight_bytes=24 * GB,
            weight_source="seed 000: bf16 12B weights are ~24 GB",
        ),
        ModelCard(
            repo_id="google/gemma-4-12B-it-assistant",
            role=Role.DRAFTER,
            quantization=Quantization.NONE,
            qat=False,
            weight_bytes=int(0.8 * GB),
            weight_source="seed 000: the assistant takes ~0.8 GB of VRAM (bf16); 4 layers, "
            "hidden 1024, no KV cache of its own",
            params_billions=0.4,
            architecture=None,
        ),
    )
}
