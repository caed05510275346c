"""Where a server keeps vLLM's compile cache, and the key that keeps other servers out of it.

vLLM 0.27.1 writes its torch.compile artefacts under `VLLM_CACHE_ROOT` (GPU) and the TPU image's
JAX compile cache under `VLLM_XLA_CACHE_PATH`, both in the container's filesystem by default, so
every new instance compiles again. A stack with a model bucket keeps them in it, under
`compile-cache/<key>/`: a second, writable mount of the bucket that gcsfuse's `only-dir`
restricts to that folder (a TPU VM copies that folder to and from a local directory instead,
restoring only a copy its completion marker vouches for: serving/render/tpu_startup.py). The key
is a digest of what decides the compiled artefacts: the image, the `vllm serve` command line (in
order), its environment and the hardware. Servers with different keys never read each other's
artefacts, which are code vLLM loads; inside the folder vLLM's own keys (its version, config,
code and compiler hashes) still decide reuse.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from serving.render.vllm import FUSE_MOUNT_OPTIONS

#: The bucket folder every key's cache lives under.
CACHE_PREFIX = "compile-cache"
#: Name and mount path of the cache volume in the serving container.
CACHE_VOLUME = "compile-cache"
CACHE_MOUNT_PATH = "/mnt/compile-cache"
#: vLLM 0.27.1's cache locations (vllm/envs.py): torch.compile under VLLM_CACHE_ROOT; the TPU
#: image's JAX cache at VLLM_XLA_CACHE_PATH (tpu-inference v0.27.0 compilation_manager.py).
#: Both are location-only: vLLM leaves them out of its own cache key, and so does this one.
GPU_CACHE_ENV = "VLLM_CACHE_ROOT"
TPU_CACHE_ENV = "VLLM_XLA_CACHE_PATH"
CACHE_ENVS = (GPU_CACHE_ENV, TPU_CACHE_ENV)
#: Hex digits kept: 64 bits, a short path segment no two configurations share by chance.
KEY_LENGTH = 16


def cache_key(
    *, image: str, argv: Sequence[str], env: Mapping[str, str], accelerator: str, count: int
) -> str:
    """The key of one server's compiled artefacts.

    `env` is the container's literal environment; the cache locations are left out. Every
    other variable counts, a superset of what vLLM's own key reads (its `compile_factors`):
    a change vLLM ignores costs one compile, a change it reads is never missed."""
    material = {
        "image": image,
        "argv": list(argv),
        "env": {name: env[name] for name in sorted(env) if name not in CACHE_ENVS},
        "accelerator": accelerator,
        "count": count,
    }
    digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
    return digest[:KEY_LENGTH]


def cache_folder(key: str) -> str:
    """The bucket folder of one key's cache."""
    return f"{CACHE_PREFIX}/{key}"


def mount_options(key: str) -> list[str]:
    """The cache volume's gcsfuse options: the model mount's owner contract, and `only-dir`
    so the server sees (and writes) its own key's folder and nothing else of the bucket."""
    return [*FUSE_MOUNT_OPTIONS, f"only-dir={cache_folder(key)}"]


def cache_env(tpu: bool) -> dict[str, str]:
    """The variable that points vLLM's compile cache at the mount: the JAX cache on a TPU,
    torch.compile's root on a GPU."""
    return {TPU_CACHE_ENV if tpu else GPU_CACHE_ENV: CACHE_MOUNT_PATH}
