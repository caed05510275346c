"""Loaded at start-up by every Python process of the engine when `scripts/engine-check --isa
avx2` runs (this folder first on ``PYTHONPATH``, ``GEMMA4_ENGINE_ISA=avx2``): wraps
``torch.cpu.get_capabilities()``, from which vLLM 0.27.1 picks its kernel library and its CPU
attention's KV cache formats, so that every ``avx512*`` and ``amx*`` entry reads False and a
machine that has them takes the path of an AVX2-only one (docs/engine-check.md).
``ATEN_CPU_CAPABILITY=avx2``, set beside this, holds torch's own kernels to AVX2.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Mapping, Sequence
from types import MappingProxyType, ModuleType
from typing import Any

MASKED = ("avx512", "amx")


def masked(capabilities: Mapping[str, Any]) -> Mapping[str, Any]:
    """``capabilities`` with every AVX-512 and AMX feature reported absent."""
    return MappingProxyType(
        {k: (False if k.startswith(MASKED) else v) for k, v in capabilities.items()}
    )


def _patch(module: ModuleType) -> None:
    real = module.get_capabilities
    setattr(module, "get_capabilities", lambda: masked(real()))  # noqa: B010 - a module's name


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch.cpu":
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


if os.environ.get("GEMMA4_ENGINE_ISA") == "avx2":
    sys.meta_path.insert(0, _Finder())
