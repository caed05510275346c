"""gpu-memory-utilization-range: vLLM's share of device memory stays in a safe range."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting_float
from policies._server import vllm_servers

CONFIG = schema(
    {
        "min": {
            "type": "number",
            "default": 0.5,
            "description": "Smallest --gpu-memory-utilization allowed.",
        },
        "max": {
            "type": "number",
            "default": 0.95,
            "description": "Largest --gpu-memory-utilization allowed.",
        },
    }
)


def validate_gpu_memory_utilization_range(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    low = setting_float(args, CONFIG, "min")
    high = setting_float(args, CONFIG, "max")
    for server in vllm_servers(args.resource_type, args.props):
        raw = server.value("gpu-memory-utilization")
        value = server.float_value("gpu-memory-utilization")
        if raw is None and "gpu-memory-utilization" not in server.args:
            continue  # a release without a contract snapshot: pinned-image refuses it
        if value is None:
            report_violation(
                f"{args.name}: {server.where} has --gpu-memory-utilization={raw!r}, which is "
                f"not a number; set a fraction between {low} and {high}.",
                None,
            )
        elif value > high:
            report_violation(
                f"{args.name}: {server.where} has --gpu-memory-utilization={value}, above "
                f"{high}: CUDA context and graphs need the rest, and vLLM refuses to start "
                "when 'Free memory on device ... is less than desired GPU memory utilization'. "
                f"Set it to {high} or less (stack config key 'gpuMemoryUtilization').",
                None,
            )
        elif value < low:
            report_violation(
                f"{args.name}: {server.where} has --gpu-memory-utilization={value}, below "
                f"{low}: too little memory is left for the KV cache ('No available memory for "
                f"the cache blocks'). Set it between {low} and {high} (stack config key "
                "'gpuMemoryUtilization').",
                None,
            )


gpu_memory_utilization_range = resource_policy(
    "gpu-memory-utilization-range",
    "vLLM's --gpu-memory-utilization lies within the configured range.",
    validate_gpu_memory_utilization_range,
    config=CONFIG,
)
