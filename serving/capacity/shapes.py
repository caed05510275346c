"""What one checkpoint reads and computes on one hardware (pure): the step model's inputs."""

from __future__ import annotations

from serving.capacity.perf import Device, KvLayer, Shape
from serving.catalog.hardware import HardwareProfile
from serving.catalog.models import ModelCard
from serving.sizing.memory import kv_bytes_per_token_per_layer, kv_dtype_bytes


def device_for(profile: HardwareProfile) -> Device:
    n = profile.accelerator_count
    return Device(
        name=profile.display_name,
        memory_bandwidth_bytes_per_s=profile.memory_bandwidth_bytes_per_s * n,
        dense_flops=profile.dense_bf16_flops * n,
        source=f"{profile.memory_bandwidth_source}; {profile.compute_source}",
    )


def shape_for(
    card: ModelCard,
    kv_cache_dtype: str,
    model_dtype: str = "auto",
    drafter: ModelCard | None = None,
    tensor_parallel: int = 1,
) -> Shape:
    arch = card.architecture
    if arch is None:
        raise ValueError(f"{card.repo_id} has no architecture in the model catalog")
    dtype = kv_dtype_bytes(kv_cache_dtype, model_dtype)
    layers = tuple(
        KvLayer(
            layers=a.layers,
            # All devices together (heads split, or replicated when fewer than devices).
            bytes_per_token=kv_bytes_per_token_per_layer(a, dtype, tensor_parallel)
            * tensor_parallel,
            window=a.window,
        )
        for a in arch.attention
    )
    return Shape(
        name=card.repo_id,
        weight_bytes=float(card.weight_bytes),
        params=card.params_billions * 1e9,
        kv_layers=layers,
        drafter_bytes=float(drafter.weight_bytes) if drafter else 0.0,
        drafter_params=drafter.params_billions * 1e9 if drafter else 0.0,
    )
