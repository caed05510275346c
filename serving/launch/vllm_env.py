"""Environment variables that change what vLLM loads, serves or runs: refused by name.

Pure: no Pulumi import. vLLM 0.27.1 reads about 250 `VLLM_*` variables (vllm/envs.py). The
launch reader accepts the few listed in :data:`ALLOWED_VLLM` (authentication, logging, usage
statistics, timeouts, the FlashInfer sampler the shipped GPU stacks set) and refuses every other
`VLLM_*` name, since the policies cannot judge what it changes: among them
`VLLM_MODEL_REDIRECT_PATH` (serves another model), `VLLM_USE_MODELSCOPE` (downloads from
ModelScope), `VLLM_PLUGINS` (loads plugins), `VLLM_ALLOW_RUNTIME_LORA_UPDATING` (loads
adapters at run time), `VLLM_ALLOW_LONG_MAX_MODEL_LEN`, `VLLM_SERVER_DEV_MODE`,
`VLLM_RUST_FRONTEND_PATH`, `VLLM_LOGGING_CONFIG_PATH`. Variables of the libraries under vLLM
that redirect downloads or load code are refused too: named ones (:data:`REFUSED_OTHER`, `HOME`
among them) and whole families (:data:`REFUSED_FAMILIES`: `LD_*`, `PYTHON*`, `HF_*`, `XDG_*`,
...) but for the members listed in :data:`ALLOWED_OTHER`.
"""

from __future__ import annotations

from collections.abc import Iterable

#: `VLLM_*` variables the reader accounts for: none changes the model, the code or the port.
ALLOWED_VLLM = frozenset(
    {
        "VLLM_API_KEY",
        "VLLM_USE_FLASHINFER_SAMPLER",
        "VLLM_LOGGING_LEVEL",
        "VLLM_LOGGING_PREFIX",
        "VLLM_LOGGING_COLOR",
        "VLLM_CONFIGURE_LOGGING",
        "VLLM_DISABLE_LOG_LOGO",
        "VLLM_LOG_STATS_INTERVAL",
        "VLLM_NO_USAGE_STATS",
        "VLLM_DO_NOT_TRACK",
        "VLLM_USAGE_SOURCE",
        "VLLM_ENGINE_READY_TIMEOUT_S",
        "VLLM_ENGINE_ITERATION_TIMEOUT_S",
        "VLLM_HTTP_TIMEOUT_KEEP_ALIVE",
        "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS",
        "VLLM_XLA_CHECK_RECOMPILATION",
    }
)
#: Other variables that redirect where weights come from or load code into the process.
REFUSED_OTHER: dict[str, str] = {
    "HF_ENDPOINT": "downloads the checkpoint from another server",
    "HF_HUB_CACHE": "resolves Hugging Face ids from another cache",
    "HUGGINGFACE_HUB_CACHE": "resolves Hugging Face ids from another cache",
    "TRANSFORMERS_CACHE": "resolves Hugging Face ids from another cache",
    "HF_HOME": "resolves Hugging Face ids from another cache",
    "MODELSCOPE_CACHE": "resolves model ids from another cache",
    "LD_PRELOAD": "loads a library into vLLM",
    "LD_LIBRARY_PATH": "loads libraries from other paths",
    "PYTHONPATH": "imports Python code from other paths",
    "PYTHONSTARTUP": "runs Python code",
    "PYTHONHOME": "runs another Python installation",
    "PYTHONUSERBASE": "imports Python code from other paths",
    "PATH": "changes which program `vllm` is",
    "BASH_ENV": "runs a file in every shell",
    "ENV": "runs a file in every shell",
    "HOME": "moves the Hugging Face cache and Python's user site-packages (code it imports)",
    "SHELLOPTS": "changes how every shell runs",
    "BASHOPTS": "changes how every shell runs",
    "PS4": "runs code when a shell traces",
    "PROMPT_COMMAND": "runs code in a shell",
    "TMPDIR": "moves the files the libraries under vLLM write and read back",
    "LOCPATH": "loads locale data from other paths",
    "NLSPATH": "loads message catalogues from other paths",
    "HOSTALIASES": "resolves host names another way",
    "REQUESTS_CA_BUNDLE": "trusts other certificates for downloads",
    "CURL_CA_BUNDLE": "trusts other certificates for downloads",
}
#: Families of variables read by the libraries under vLLM (the dynamic loader, Python, the
#: Hugging Face libraries, PyTorch and its compilers, CUDA, NCCL, glibc, XDG directories, TLS,
#: proxies, the object-store loaders): each loads code, moves caches or redirects downloads
#: in ways too many to list, so the family is refused except for the members in
#: :data:`ALLOWED_OTHER`.
REFUSED_FAMILIES: tuple[str, ...] = (
    "LD_",
    "PYTHON",
    "HF_",
    "HUGGINGFACE_",
    "HUGGING_FACE_",
    "TRANSFORMERS_",
    "TOKENIZERS_",
    "SAFETENSORS_",
    "DIFFUSERS_",
    "TORCH",
    "PYTORCH_",
    "TRITON_",
    "CUDA_",
    "NCCL_",
    "NVIDIA_",
    "XDG_",
    "MODELSCOPE_",
    "GLIBC_",
    "MALLOC_",
    "GCONV_",
    "SSL_",
    "OPENSSL_",
    "RAY_",
    "LMCACHE_",
    "OUTLINES_",
    "XLA_",
    "TPU_",
    "PJRT_",
    "JAX_",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    # The Run:ai model streamer (`--load-format runai_streamer`) and vLLM's own object-store
    # loader (vllm/envs.py: S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3_ENDPOINT_URL) read
    # these: RUNAI_STREAMER_OVERRIDE_ENDPOINT_URL and AWS_ENDPOINT_URL(_S3) redirect where
    # the weights come from, RUNAI_STREAMER_OBJECT_PLUGIN loads a plugin.
    "RUNAI_",
    "S3_",
    "AWS_",
    "AZURE_",
)
#: Members of those families the reader accounts for: tokens, offline switches, telemetry,
#: output buffering, and the allocator and thread settings the shipped stacks set.
ALLOWED_OTHER = frozenset(
    {
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HUB_DISABLE_TELEMETRY",
        "HF_HUB_DISABLE_PROGRESS_BARS",
        "HF_HUB_ENABLE_HF_TRANSFER",
        "HF_HUB_DOWNLOAD_TIMEOUT",
        "HF_HUB_ETAG_TIMEOUT",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONFAULTHANDLER",
        "PYTHONHASHSEED",
        "PYTHONIOENCODING",
        "PYTORCH_CUDA_ALLOC_CONF",
        "TOKENIZERS_PARALLELISM",
        "MALLOC_TRIM_THRESHOLD_",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "NCCL_DEBUG",
    }
)


def _family(name: str) -> str | None:
    upper = name.upper()  # Python and curl read proxies in lower case too
    for prefix in REFUSED_FAMILIES:
        if upper.startswith(prefix):
            return prefix
    return None


def env_problems(names: Iterable[str]) -> list[str]:
    """One message per variable vLLM is given that the reader refuses."""
    problems = []
    for name in sorted(set(names)):
        if name in REFUSED_OTHER:
            problems.append(
                f"the environment variable {name} {REFUSED_OTHER[name]}, which the policies "
                "cannot judge"
            )
        elif name.startswith("VLLM_") and name not in ALLOWED_VLLM:
            problems.append(
                f"the environment variable {name} changes what vLLM 0.27.1 loads or does in a "
                "way the policies do not follow (accepted VLLM_* variables: "
                "docs/reader-grammar.md)"
            )
        elif not name.startswith("VLLM_") and name not in ALLOWED_OTHER and _family(name):
            problems.append(
                f"the environment variable {name} belongs to the {_family(name)}* variables "
                "of the libraries under vLLM, which load code, move caches or redirect "
                "downloads in ways the policies do not follow (accepted ones: "
                "docs/reader-grammar.md)"
            )
    return problems
