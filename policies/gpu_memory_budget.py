"""gpu-memory-budget: weights, drafter, runtime reserve and one full-length sequence fit.

The arithmetic is `serving.sizing.memory.plan_memory`, the same model the capacity planner prints.
"""

from __future__ import annotations

from dataclasses import replace

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting_float
from policies._resources import VllmServer, gib, speculative_config
from policies._server import vllm_servers
from serving.catalog.hardware import Platform
from serving.sizing.memory import (
    DEFAULT_PROFILE,
    GIB,
    TPU_PROFILE,
    MemoryPlan,
    RuntimeProfile,
    plan_memory,
)

CONFIG = schema(
    {
        "activationBytesPerTokenHidden": {
            "type": "number",
            "default": DEFAULT_PROFILE.activation_bytes_per_token_hidden,
            "description": "Activation peak per batched token and hidden unit, bytes.",
        },
        "nonTorchGib": {
            "type": "number",
            "default": round(DEFAULT_PROFILE.non_torch_bytes / GIB, 2),
            "description": "Memory outside torch (CUDA context, workspaces), GiB.",
        },
        "cudaGraphGib": {
            "type": "number",
            "default": round(DEFAULT_PROFILE.cuda_graph_bytes / GIB, 2),
            "description": "CUDA graph memory vLLM subtracts before sizing the KV cache, GiB.",
        },
        "minFullLengthSequences": {
            "type": "number",
            "default": 1,
            "description": "Full-length (max-model-len) sequences the KV cache must hold.",
        },
        "unknownDrafterGib": {
            "type": "number",
            "default": 1.0,
            "description": "Drafter weights assumed when the drafter is not in the catalog, GiB.",
        },
    }
)


def _profile(args: ResourceValidationArgs) -> RuntimeProfile:
    return replace(
        DEFAULT_PROFILE,
        activation_bytes_per_token_hidden=setting_float(
            args, CONFIG, "activationBytesPerTokenHidden"
        ),
        non_torch_bytes=int(setting_float(args, CONFIG, "nonTorchGib") * GIB),
        cuda_graph_bytes=int(setting_float(args, CONFIG, "cudaGraphGib") * GIB),
    )


def plan_server(
    server: VllmServer, profile: RuntimeProfile = DEFAULT_PROFILE, unknown_drafter_gib: float = 1.0
) -> MemoryPlan | None:
    """The memory plan for a vLLM server, or None when the model or GPU is not in the catalog."""
    card, hardware = server.card, server.hardware
    if card is None or card.architecture is None or hardware is None:
        return None
    architecture, weight_bytes, device_bytes = (
        card.architecture,
        card.weight_bytes,
        hardware.memory_bytes,
    )
    spec, _ = speculative_config(server.args)
    drafter_bytes = 0
    if spec is not None and spec.get("model"):
        drafter = server.drafter_checkpoint.card if server.drafter_checkpoint else None
        drafter_bytes = drafter.weight_bytes if drafter else int(unknown_drafter_gib * GIB)
    length, bad = server.max_model_len()
    if bad is not None:
        return None
    max_len = length or card.architecture.max_context
    batched = server.int_value("max-num-batched-tokens")
    tensor_parallel = server.int_value("tensor-parallel-size")
    first_utilization = server.float_value("gpu-memory-utilization")
    kv_cache_dtype = server.value("kv-cache-dtype")
    if (
        batched is None
        or tensor_parallel is None
        or first_utilization is None
        or not isinstance(kv_cache_dtype, str)
    ):
        return None  # vLLM's value is not known here (see validate_gpu_memory_budget)

    def plan(utilization: float) -> MemoryPlan:
        return plan_memory(
            architecture,
            weight_bytes=weight_bytes,
            drafter_bytes=drafter_bytes,
            device_bytes=device_bytes,
            utilization=utilization,
            max_model_len=max_len,
            max_num_batched_tokens=batched,
            kv_cache_dtype=kv_cache_dtype,
            tensor_parallel=tensor_parallel,
            profile=profile,
        )

    first = plan(first_utilization)
    kv_bytes = server.int_value("kv-cache-memory-bytes")
    if kv_bytes is None:
        return first
    # vLLM 0.27.1: --kv-cache-memory-bytes sizes the KV cache itself and ignores
    # --gpu-memory-utilization, so the budget is what weights, reserve and that cache take.
    used = first.weight_bytes + first.drafter_bytes + first.runtime_reserve_bytes + kv_bytes
    return plan(min(1.0, used / device_bytes))


def validate_gpu_memory_budget(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    profile = _profile(args)
    need = setting_float(args, CONFIG, "minFullLengthSequences")
    unknown_drafter = setting_float(args, CONFIG, "unknownDrafterGib")
    for server in vllm_servers(args.resource_type, args.props):
        if server.hardware is None:
            continue
        utilization = server.float_value("gpu-memory-utilization")
        if utilization is None or not 0 < utilization <= 1:
            continue  # gpu-memory-utilization-range reports it
        # TPU nodes (startup scripts) are held to the same budget; they capture no CUDA graphs.
        on_tpu = server.hardware.platform is Platform.TPU
        server_profile = (
            replace(profile, cuda_graph_bytes=0, label=TPU_PROFILE.label) if on_tpu else profile
        )
        if (
            server.card is not None
            and server.card.architecture is not None
            and server.int_value("max-num-batched-tokens") is None
            and "max-num-batched-tokens" not in server.args
        ):
            report_violation(
                f"{args.name}: {server.where} leaves --max-num-batched-tokens to vLLM, which "
                f"decides it at start-up on {server.accelerator} from what the platform "
                "reports (vLLM 0.27.1's get_batch_defaults; on a TPU the tpu_inference plugin "
                "names the chip), so the activation memory cannot be counted here. Give "
                "--max-num-batched-tokens (stack config key 'maxNumBatchedTokens').",
                None,
            )
            continue
        plan = plan_server(server, server_profile, unknown_drafter)
        kv_bytes = server.int_value("kv-cache-memory-bytes")
        if plan is not None and kv_bytes is not None:
            used = plan.weight_bytes + plan.drafter_bytes + plan.runtime_reserve_bytes + kv_bytes
            if used > plan.device_bytes:
                report_violation(
                    f"{args.name}: {server.where} asks for --kv-cache-memory-bytes={kv_bytes} "
                    f"({gib(kv_bytes)}), which vLLM allocates whatever "
                    f"--gpu-memory-utilization says: weights {gib(plan.weight_bytes)} + "
                    f"drafter {gib(plan.drafter_bytes)} + runtime reserve "
                    f"{gib(plan.runtime_reserve_bytes)} + {gib(kv_bytes)} = {gib(used)} > "
                    f"{gib(plan.device_bytes)} on {server.accelerator}. Lower it or drop it.",
                    None,
                )
                continue
        if plan is None or plan.capacity.max_concurrency >= need:
            continue
        budget = (
            f"weights {gib(plan.weight_bytes)} + drafter {gib(plan.drafter_bytes)} + runtime "
            f"reserve {gib(plan.runtime_reserve_bytes)} + KV cache for one "
            f"{plan.max_model_len}-token sequence {gib(plan.one_sequence_kv_bytes)} = "
            f"{gib(plan.required_bytes)} > {plan.utilization} x "
            f"{gib(plan.device_bytes)} = {gib(plan.budget_bytes)}"
        )
        report_violation(
            f"{args.name}: {server.where} does not fit on {server.accelerator}: {budget} "
            f"(room for {plan.capacity.max_concurrency:.2f} full-length sequences, need "
            f"{need:g}). vLLM would refuse to start ('No available memory for the cache "
            "blocks' / 'KV cache is needed, which is larger than the available KV cache "
            "memory'). Lower --max-model-len or --max-num-batched-tokens, use "
            "--kv-cache-dtype=fp8, a QAT checkpoint, or a larger accelerator; see "
            "`gemma4 plan`.",
            None,
        )


gpu_memory_budget = resource_policy(
    "gpu-memory-budget",
    "The model, drafter, runtime reserve and one full-length sequence of KV cache "
    "fit in vLLM's share of GPU memory.",
    validate_gpu_memory_budget,
    config=CONFIG,
)
