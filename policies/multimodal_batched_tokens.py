"""multimodal-batched-tokens: one whole image fits in a step when it may not be chunked.

vLLM 0.27.1 refuses to start when chunked multimodal input is disabled and one item has more
tokens than `--max-num-batched-tokens` (`compute_mm_encoder_budget`,
`vllm/v1/core/encoder_cache_manager.py`). It is disabled by `--disable-chunked-mm-input`, and
forced off on CUDA for Gemma 4's bidirectional attention (`vllm/platforms/cuda.py`) and on TPU
for every multimodal model (`tpu_inference/platforms/tpu_platform.py`). The item's size is
the catalogue's (`ModelCard.max_tokens_per_mm_item`).
"""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema
from policies._resources import TPU_QUEUED_RESOURCE, TPU_VM, VllmServer
from policies._server import vllm_servers
from serving.catalog.hardware import Platform

CONFIG = schema(
    {
        "maxTokensPerMmItem": {
            "type": "integer",
            "default": 2496,
            "description": "No longer read: the size of one multimodal item is the model "
            "catalogue's (`max_tokens_per_mm_item` of the served checkpoint; 2496 for Gemma 4). "
            "Kept so existing configurations still load.",
        },
    }
)


def _on_tpu(server: VllmServer) -> bool | None:
    """True on a TPU, False on a GPU, None when the platform is not known."""
    if server.hardware is not None:
        return server.hardware.platform is Platform.TPU
    if server.resource_type in (TPU_VM, TPU_QUEUED_RESOURCE):
        return True
    return None


def _why_disabled(server: VllmServer) -> str | None:
    """Why vLLM runs this server with chunked multimodal input disabled, or None."""
    if server.flag("disable-chunked-mm-input"):
        return "disables chunked multimodal input (--disable-chunked-mm-input)"
    card = server.card
    if card is None or not card.chunked_mm_input_forced_off(_on_tpu(server)):
        return None
    if card.mm_prefix_lm:
        return (
            f"serves {card.repo_id}, a multimodal model with bidirectional (prefix-LM) "
            "attention, for which vLLM disables chunked multimodal input whatever the flags "
            "say ('Forcing --disable_chunked_mm_input for models with multimodal-bidirectional "
            "attention.'; the TPU platform does the same for every multimodal model),"
        )
    return (
        f"serves {card.repo_id}, a multimodal model, on a TPU (or a platform not known here), "
        "where vLLM disables chunked multimodal input whatever the flags say,"
    )


def validate_multimodal_batched_tokens(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    for server in vllm_servers(args.resource_type, args.props):
        why = _why_disabled(server)
        if why is None:
            continue
        card = server.card
        per_item = None if card is None else card.max_tokens_per_mm_item
        if per_item is None:
            # Not a catalogue checkpoint (vllm-server-readable refuses it), or one that takes
            # no images: no multimodal item to fit.
            continue
        if server.flag("language-model-only") and not server.flag("enable-mm-embeds"):
            # Every modality's limit is 0 (`MultiModalConfig.get_limit_per_prompt`), so no
            # item is budgeted (`vllm/multimodal/encoder_budget.py`) and vLLM checks nothing.
            continue
        if "mm-processor-kwargs" in server.args:
            report_violation(
                f"{args.name}: {server.where} {why} and sets --mm-processor-kwargs, which can "
                f"change how many tokens one image takes (Gemma 4's processor reads "
                f"max_soft_tokens from it), so the catalogue's {per_item} tokens per item no "
                "longer tell whether one item fits a step; leave --mm-processor-kwargs out.",
                None,
            )
            continue
        given = "max-num-batched-tokens" in server.args
        batched = server.int_value("max-num-batched-tokens")
        if batched is None and not given:
            # vLLM decides it at start-up, on this platform in a way not known here; for a
            # multimodal prefix-LM model (Gemma 4) its rule raises it to one whole item.
            continue
        if batched is not None and batched >= per_item:
            continue
        shown = batched if given else f"{batched} (vLLM's start-up default here)"
        report_violation(
            f"{args.name}: {server.where} {why} with --max-num-batched-tokens={shown}; vLLM "
            f"refuses to start ('Chunked MM input disabled but max_tokens_per_mm_item "
            f"({per_item}) is larger than max_num_batched_tokens'). Set "
            f"--max-num-batched-tokens to at least {per_item} (stack config key "
            "'maxNumBatchedTokens')"
            + (
                "."
                if card is not None and card.mm_prefix_lm
                else " or allow chunked multimodal input (on a GPU)."
            ),
            None,
        )


multimodal_batched_tokens = resource_policy(
    "multimodal-batched-tokens",
    "When vLLM runs with chunked multimodal input disabled (the flag, or forced "
    "for a multimodal prefix-LM model such as Gemma 4, or on a TPU), a scheduler step holds "
    "one whole multimodal item.",
    validate_multimodal_batched_tokens,
    config=CONFIG,
)
