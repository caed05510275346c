"""mtp-max-num-seqs (advisory): MTP measured slower on an L4 under concurrency."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting_int, setting_strings
from policies._resources import speculative_config
from policies._server import vllm_servers

CONFIG = schema(
    {
        "maxNumSeqs": {
            "type": "integer",
            "default": 4,
            "description": "Largest --max-num-seqs that is not flagged with MTP on.",
        },
        "accelerators": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["nvidia-l4"],
            "description": "GPU types where MTP under concurrency was measured slower.",
        },
    }
)


def validate_mtp_max_num_seqs(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    threshold = setting_int(args, CONFIG, "maxNumSeqs")
    accelerators = setting_strings(args, CONFIG, "accelerators")
    for server in vllm_servers(args.resource_type, args.props):
        if server.accelerator not in accelerators:
            continue
        spec, _ = speculative_config(server.args)
        seqs = server.int_value("max-num-seqs")
        if spec is None or seqs is None or seqs <= threshold:
            continue
        report_violation(
            f"{args.name}: {server.where} runs speculative decoding ({spec.get('method')}) with "
            f"--max-num-seqs={seqs} on {server.accelerator}; the reference L4 measurements "
            "served 18.9-23.8 req/s without MTP and 8-13 req/s with it under concurrency. "
            f"Turn MTP off (speculativeMethod: none) or keep --max-num-seqs at {threshold} or "
            "less for latency-bound, low-concurrency use.",
            None,
        )


mtp_max_num_seqs = resource_policy(
    "mtp-max-num-seqs",
    "MTP speculative decoding on an NVIDIA L4 is not combined with high concurrency.",
    validate_mtp_max_num_seqs,
    advisory=True,
    config=CONFIG,
)
