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
def _preview(stack: str, root: Path) -> Any:
    """The stack of the project in ``root`` (its program, policies and stack file), never one
    found from the current directory."""
    from preview.build import build_preview

    return build_preview(stack, root=root, project_dir=root)


def gke_topology(root: Path) -> Diagram:
    from scripts.figures.topology import gke_diagram, render

    return gke_diagram(GKE_STACK, render(GKE_STACK, root))


def cloud_run_topology(root: Path) -> Diagram:
    from scripts.figures.topology import cloud_run_diagram

    return cloud_run_diagram(CLOUD_RUN_STACK, _preview(CLOUD_RUN_STACK, root).resources)


def preview_path(root: Path) -> Diagram:
    from scripts.figures.flow import diagram

    return diagram(_preview(CLOUD_RUN_STACK, root), root)


def import_graph_figure(root: Path) -> Diagram:
    return imports.diagram(imports.import_graph(root), root)


@dataclass(frozen=True)
class Figure:
    #: The file under the site's ``figures/``.
    name: str
    #: Draws it from the project in the folder it is given.
    draw: Callable[[Path], Diagram]


DIAGRAMS = (
    Figure("gke-topology.svg", gke_topology),
    Figure("cloud-run-topology.svg", cloud_run_topology),
    Figure("preview-path.svg", preview_path),
    Figure("import-graph.svg", import_graph_figure),
    Figure("promotion.svg", promotion.diagram),
)


def write_all(out: Path, root: Path) -> list[Path]:
    """Draw every figure of the project in ``root`` into ``out``; returns the files written."""
    from scripts.figures.bench_run import write as write_bench

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for figure in DIAGRAMS:
        path = out / figure.name
        write_svg(figure.draw(root), path)
        written.append(path)
    written += write_bench(out)
    return written
