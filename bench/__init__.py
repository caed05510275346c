"""Benchmark a vLLM endpoint as users feel it: sweeps, reports, comparisons and an SLO gate.

Library entry points (the CLI, ``python -m bench``, is built on them):

- :func:`run_sweep` / :func:`run_sweep_async`: run a :class:`Grid` against an endpoint into a
  run directory, cell by cell (resumable, one locked experiment per directory, after a
  one-request preflight that raises :class:`PreflightError`); returns the :class:`RunData`.
- :func:`load_run`: read a run directory back.
- :func:`evaluate` (from :mod:`bench.gate`): check a run against
  :class:`serving.settings.SloSettings`; :func:`slo_for_stack` reads them from a stack file.
- :func:`compare_runs`: runs side by side with deltas and cost per million requests.
- :func:`percentile`, :func:`summarize`: the statistics.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compare import Comparison, compare_runs, cost_per_million_requests
    from .gate import GateCheck, GateResult, evaluate, slo_for_stack, stack_config
    from .request import ERROR_KINDS, RequestResult, RequestSpec, send_request
    from .stats import GoodputSlo, percentile, summarize
    from .store import SCHEMA_VERSION, CellKey, RunData, StoreError, load_run
    from .sweep import Grid, PreflightError, SweepOptions, run_sweep, run_sweep_async

# Imported on first use: a worker process of the load (bench.hotload) imports this package and
# should not pay for matplotlib, httpx or the sweep before its cell starts.
_EXPORTS = {
    "Comparison": "compare",
    "compare_runs": "compare",
    "cost_per_million_requests": "compare",
    "GateCheck": "gate",
    "GateResult": "gate",
    "evaluate": "gate",
    "slo_for_stack": "gate",
    "stack_config": "gate",
    "ERROR_KINDS": "request",
    "RequestResult": "request",
    "RequestSpec": "request",
    "send_request": "request",
    "GoodputSlo": "stats",
    "percentile": "stats",
    "summarize": "stats",
    "SCHEMA_VERSION": "store",
    "CellKey": "store",
    "RunData": "store",
    "StoreError": "store",
    "load_run": "store",
    "Grid": "sweep",
    "PreflightError": "sweep",
    "SweepOptions": "sweep",
    "run_sweep": "sweep",
    "run_sweep_async": "sweep",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ERROR_KINDS",
    "SCHEMA_VERSION",
    "CellKey",
    "Comparison",
    "GateCheck",
    "GateResult",
    "GoodputSlo",
    "Grid",
    "PreflightError",
    "RequestResult",
    "RequestSpec",
    "RunData",
    "StoreError",
    "SweepOptions",
    "compare_runs",
    "cost_per_million_requests",
    "evaluate",
    "load_run",
    "percentile",
    "run_sweep",
    "run_sweep_async",
    "send_request",
    "slo_for_stack",
    "stack_config",
    "summarize",
]
