"""multimodal-batched-tokens: one whole image fits in a step when it may not be chunked."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from policies._config import schema, setting_int
from policies._server import vllm_servers

CONFIG = schema(
    {
        "maxTokensPerMmItem": {
            "type": "integer",
            "default": 2496,
            "description": "Tokens of the largest multimodal item (Gemma 4: 2496).",
        },
    }
)


def validate_multimodal_batched_tokens(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    per_item = setting_int(args, CONFIG, "maxTokensPerMmItem")
    for server in vllm_servers(args.resource_type, args.props):
        if not server.flag("disable-chunked-mm-input"):
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
            f"{args.name}: {server.where} disables chunked multimodal input with "
            f"--max-num-batched-tokens={shown}; vLLM refuses to start ('Chunked MM input "
            f"disabled but max_tokens_per_mm_item ({per_item}) is larger than "
            f"max_num_batched_tokens'). Set --max-num-batched-tokens to at least {per_item} "
            "(stack config key 'maxNumBatchedTokens') or allow chunked multimodal input.",
            None,
        )


multimodal_batched_tokens = ResourceValidationPolicy(
    name="multimodal-batched-tokens",
    description="With chunked multimodal input disabled, a scheduler step holds one whole "
    "multimodal item.",
    validate=validate_multimodal_batched_tokens,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=CONFIG,
)
