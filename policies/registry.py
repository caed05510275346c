"""Every policy of the pack, importable without starting a policy server.

`policies/__main__.py` hands :data:`ALL` to `PolicyPack`; tests and the docs read it here
(constructing a `PolicyPack` starts a gRPC server and never returns).
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, Policy

from policies.accelerator_pool_match import accelerator_pool_match
from policies.accelerators_match_parallelism import accelerators_match_parallelism
from policies.autoscaler_vllm_metrics import autoscaler_vllm_metrics
from policies.checkpoint_from_download_job import checkpoint_from_download_job
from policies.compile_cache_keyed import compile_cache_keyed
from policies.cpu_always_allocated import cpu_always_allocated
from policies.gpu_host_minimums import gpu_host_minimums
from policies.gpu_memory_budget import gpu_memory_budget
from policies.gpu_memory_utilization_range import gpu_memory_utilization_range
from policies.hooks_endpoint_own_gateway import hooks_endpoint_own_gateway
from policies.inference_pool_wiring import inference_pool_wiring
from policies.l4_qat_checkpoint import l4_qat_checkpoint
from policies.max_instances_cap import max_instances_cap
from policies.max_model_len_cap import max_model_len_cap
from policies.max_replicas_node_pool import max_replicas_node_pool
from policies.min_instances_cost import min_instances_cost
from policies.model_volume_read_only import model_volume_read_only
from policies.mtp_max_num_seqs import mtp_max_num_seqs
from policies.multimodal_batched_tokens import multimodal_batched_tokens
from policies.no_host_network import no_host_network
from policies.no_plaintext_secrets import no_plaintext_secrets
from policies.no_public_gateway import no_public_gateway
from policies.no_public_invoker import no_public_invoker
from policies.pinned_image import pinned_image
from policies.public_gateway_https_only import public_gateway_https_only
from policies.serving_port_not_public import serving_port_not_public
from policies.speculative_config_valid import speculative_config_valid
from policies.tpu_run_duration_limit import tpu_run_duration_limit
from policies.vllm_api_key_from_secret import vllm_api_key_from_secret
from policies.vllm_only_through_pool import vllm_only_through_pool
from policies.vllm_port_probed import vllm_port_probed
from policies.vllm_readiness_health import vllm_readiness_health
from policies.vllm_server_readable import vllm_server_readable

PACK_NAME = "gemma4-vllm"
#: The pack's default level; every policy sets its own explicitly.
PACK_ENFORCEMENT_LEVEL = EnforcementLevel.MANDATORY

ALL: list[Policy] = [
    # every vLLM server can be read (the others judge what it reads)
    vllm_server_readable,
    checkpoint_from_download_job,
    # L4 (a 24 GB GPU)
    l4_qat_checkpoint,
    max_model_len_cap,
    gpu_memory_utilization_range,
    gpu_memory_budget,
    # every GPU service
    cpu_always_allocated,
    model_volume_read_only,
    compile_cache_keyed,
    gpu_host_minimums,
    multimodal_batched_tokens,
    speculative_config_valid,
    pinned_image,
    vllm_port_probed,
    accelerators_match_parallelism,
    # Kubernetes Pods on GKE nodes
    accelerator_pool_match,
    inference_pool_wiring,
    vllm_readiness_health,
    autoscaler_vllm_metrics,
    max_replicas_node_pool,
    # security
    no_public_invoker,
    no_public_gateway,
    no_plaintext_secrets,
    vllm_api_key_from_secret,
    no_host_network,
    public_gateway_https_only,
    vllm_only_through_pool,
    hooks_endpoint_own_gateway,
    serving_port_not_public,
    # advisory
    mtp_max_num_seqs,
    min_instances_cost,
    max_instances_cap,
    tpu_run_duration_limit,
]

BY_NAME: dict[str, Policy] = {policy.name: policy for policy in ALL}
