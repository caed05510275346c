"""The documentation's figures, drawn from the code when the site is built (by
``scripts/mkdocs_hooks.py``, into ``figures/<name>``); nothing drawn is committed, so a figure
cannot be older than the code it shows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.figures import imports, promotion
from scripts.figures.draw import Diagram, write_svg

#: The stacks drawn: one GKE stack, one Cloud Run stack.
GKE_STACK = "gke-l4"
CLOUD_RUN_STACK = "l4"


@functools.cache
def _preview(stack: str) -> Any:
    """This project's own stack, wherever the site is built from (``mkdocs build -f``)."""
    from preview.build import build_preview
    from preview.harness import ROOT

    return build_preview(stack, project_dir=ROOT)


def gke_topology() -> Diagram:
    from scripts.figures.topology import gke_diagram, render

    return gke_diagram(GKE_STACK, render(GKE_STACK))


def cloud_run_topology() -> Diagram:
    from scripts.figures.topology import cloud_run_diagram

    return cloud_run_diagram(CLOUD_RUN_STACK, _preview(CLOUD_RUN_STACK).resources)


def preview_path() -> Diagram:
    from scripts.figures.flow import diagram

    return diagram(_preview(CLOUD_RUN_STACK))


@dataclass(frozen=True)
class Figure:
    #: The file under the site's ``figures/``.
    name: str
    draw: Callable[[], Diagram]


DIAGRAMS = (
    Figure("gke-topology.svg", gke_topology),
    Figure("cloud-run-topology.svg", cloud_run_topology),
    Figure("preview-path.svg", preview_path),
    Figure("import-graph.svg", imports.diagram),
    Figure("promotion.svg", promotion.diagram),
)


def write_all(out: Path) -> list[Path]:
    """Draw every figure into ``out``; returns the files written."""
    from scripts.figures.bench_run import write as write_bench

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for figure in DIAGRAMS:
        path = out / figure.name
        write_svg(figure.draw(), path)
        written.append(path)
    written += write_bench(out)
    return written
