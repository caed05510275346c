"""speculative-config-valid: the speculative config is one JSON object with a drafter."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting_int, setting_strings
from policies._resources import as_int, speculative_config
from policies._server import vllm_servers

CONFIG = schema(
    {
        "minTokens": {
            "type": "integer",
            "default": 1,
            "description": "Fewest speculative tokens per step.",
        },
        "maxTokens": {
            "type": "integer",
            "default": 5,
            "description": "Most speculative tokens per step.",
        },
        "methodsWithoutDrafter": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["ngram", "suffix"],
            "description": "Speculative methods that need no drafter model.",
        },
    }
)


def validate_speculative_config(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    low = setting_int(args, CONFIG, "minTokens")
    high = setting_int(args, CONFIG, "maxTokens")
    no_drafter = setting_strings(args, CONFIG, "methodsWithoutDrafter")
    for server in vllm_servers(args.resource_type, args.props):
        spec, error = speculative_config(server.args)
        if error is not None:
            report_violation(
                f"{args.name}: {server.where}: {error}. Pass the whole JSON object as one "
                "argument element (a comma-separated argument list splits it); render it with "
                "json.dumps.",
                None,
            )
            continue
        if spec is None:
            continue
        method = spec.get("method")
        if method not in no_drafter and not spec.get("model"):
            report_violation(
                f"{args.name}: {server.where}: --speculative-config names no drafter "
                f"('model') for method {method!r}; add the assistant checkpoint's path (stack "
                "config key 'drafter').",
                None,
            )
        tokens = as_int(spec.get("num_speculative_tokens"))
        if tokens is None or not low <= tokens <= high:
            report_violation(
                f"{args.name}: {server.where}: --speculative-config has num_speculative_tokens "
                f"{spec.get('num_speculative_tokens')!r}; set an integer from {low} to {high} "
                "(stack config key 'numSpeculativeTokens').",
                None,
            )


speculative_config_valid = resource_policy(
    "speculative-config-valid",
    "vLLM's --speculative-config is a JSON object with a drafter and a bounded "
    "number of speculative tokens.",
    validate_speculative_config,
    config=CONFIG,
)
