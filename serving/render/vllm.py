"""Render vLLM's command line and environment from typed settings, and read one back.

Arguments are a real list, one `--flag=value` element per option, so no value is ever split
or re-quoted by a shell; the speculative config is a single element whose JSON comes from
`json.dumps`. :func:`parse_args` reads such a list (or a hand-written one using
`--flag value`) back into a mapping, which is how the policy pack inspects deployed resources.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from serving.catalog.hardware import Platform
from serving.catalog.models import Quantization
from serving.config.settings import Settings

#: Where the model bucket is mounted inside the serving container.
MODEL_MOUNT_PATH = "/mnt/models"
#: Owner (uid and gid) of the model bucket's files inside the container: the mount options
#: `uid=1001;gid=1001` are part of this package's contract (from the reference deployment).
#: They are not the user vLLM's image runs as: vLLM 0.27.1's `vllm/vllm-openai` keeps
#: `USER root` (docker/Dockerfile), and its opt-in `vllm-openai-nonroot` target runs as uid 2000,
#: gid 0. Neither needs to own the files to read them: gcsfuse shows files as 0644 and
#: directories as 0755 unless the mount options say otherwise (its docs/semantics.md).
VLLM_UID = VLLM_GID = 1001
#: The model bucket's GCS FUSE mount options: the package's mount-owner contract, the same on
#: Cloud Run (a list) and on GKE's GCS FUSE CSI driver (joined with commas).
FUSE_MOUNT_OPTIONS = (f"uid={VLLM_UID}", f"gid={VLLM_GID}")
#: Port vLLM listens on in a Cloud Run container (Cloud Run routes to it).
CLOUD_RUN_PORT = 8080
VLLM_COMMAND = ("vllm", "serve")

#: Environment for CUDA images (from the reference L4 deployment).
CUDA_ENV: dict[str, str] = {
    "VLLM_USE_FLASHINFER_SAMPLER": "1",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_TRIM_THRESHOLD_": "65536",
    # Weights and tokenizer come from the mounted bucket: never reach the Hub at boot.
    "HF_HUB_OFFLINE": "1",
}


@dataclass(frozen=True)
class VllmCommand:
    """The container command, its argument list and its environment."""

    command: tuple[str, ...]
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def argv(self) -> list[str]:
        return [*self.command, *self.args]

    def command_line(self) -> str:
        """One shell-quoted line, for display and for the startup scripts that need one."""
        return shlex.join(self.argv)


def speculative_config(settings: Settings, drafter_path: str | None) -> dict[str, Any] | None:
    """The `--speculative-config` object, or None when speculative decoding is off."""
    m = settings.model
    if m.speculative_method == "none":
        return None
    config: dict[str, Any] = {
        "method": m.speculative_method,
        "model": drafter_path or m.drafter,
        "num_speculative_tokens": m.num_speculative_tokens,
    }
    return config


def render(
    settings: Settings,
    *,
    model_path: str,
    drafter_path: str | None = None,
    port: int,
) -> VllmCommand:
    """Turn settings into the `vllm serve` argument list and environment (the download job
    fetches `modelRevision` / `drafterRevision` into the bucket; vLLM reads that copy)."""
    v = settings.vllm
    card = settings.model.card
    args: list[str] = [
        model_path,
        f"--served-model-name={settings.model.served_name}",
    ]
    if card.quantization is Quantization.W4A16_COMPRESSED_TENSORS:
        args.append("--quantization=compressed-tensors")
    args += [
        f"--dtype={v.dtype}",
        f"--max-model-len={v.max_model_len}",
        f"--gpu-memory-utilization={v.gpu_memory_utilization}",
    ]
    if v.kv_cache_dtype != "auto":
        args.append(f"--kv-cache-dtype={v.kv_cache_dtype}")
    args += [
        f"--tensor-parallel-size={settings.profile.accelerator_count}",
        f"--max-num-seqs={v.max_num_seqs}",
        f"--max-num-batched-tokens={v.max_num_batched_tokens}",
        "--enable-chunked-prefill" if v.chunked_prefill else "--no-enable-chunked-prefill",
        "--enable-prefix-caching" if v.prefix_caching else "--no-enable-prefix-caching",
    ]
    if not v.chunked_mm_input:
        args.append("--disable-chunked-mm-input")
    if v.load_format != "auto":
        args.append(f"--load-format={v.load_format}")
    if v.safetensors_load_strategy != "default":
        args.append(f"--safetensors-load-strategy={v.safetensors_load_strategy}")
    if v.tool_call_parser != "none":
        args += ["--enable-auto-tool-choice", f"--tool-call-parser={v.tool_call_parser}"]
    if v.reasoning_parser != "none":
        args.append(f"--reasoning-parser={v.reasoning_parser}")
    if v.async_scheduling:
        args.append("--async-scheduling")
    spec = speculative_config(settings, drafter_path)
    if spec is not None:
        args.append("--speculative-config=" + json.dumps(spec, separators=(",", ":")))
    args += ["--host=0.0.0.0", f"--port={port}"]
    env = dict(CUDA_ENV) if settings.profile.platform is Platform.CLOUD_RUN else {}
    return VllmCommand(command=VLLM_COMMAND, args=tuple(args), env=env)


def mounted(settings: Settings, *, port: int) -> VllmCommand:
    """vLLM reading the checkpoints from the model bucket mounted at :data:`MODEL_MOUNT_PATH`
    (Cloud Run and GKE)."""
    card, drafter = settings.model.card, settings.model.drafter_card
    return render(
        settings,
        model_path=f"{MODEL_MOUNT_PATH}/{card.folder}",
        drafter_path=f"{MODEL_MOUNT_PATH}/{drafter.folder}" if drafter else None,
        port=port,
    )


def parse_args(argv: Sequence[str]) -> dict[str, Any]:
    """Read vLLM arguments back into `{"option-name": value}`.

    Accepts `--flag=value`, `--flag value`, bare flags (True), `--no-flag` (False) and
    underscores in option names. A leading `vllm serve` and the positional model go under
    `"model"`. Values stay strings; callers convert what they check.
    """
    items = list(argv)
    if items[:2] == list(VLLM_COMMAND):
        items = items[2:]
    out: dict[str, Any] = {}
    i = 0
    while i < len(items):
        item = items[i]
        if not item.startswith("--"):
            out.setdefault("model", item)
            i += 1
            continue
        name, eq, value = item[2:].partition("=")
        name = name.replace("_", "-")
        if eq:
            out[name] = value
        elif i + 1 < len(items) and not items[i + 1].startswith("--"):
            out[name] = items[i + 1]
            i += 1
        elif name.startswith("no-"):
            out[name[3:]] = False
        else:
            out[name] = True
        i += 1
    return out
