"""Pull request checks and the promotion chain, drawn from the GitHub workflows themselves (jobs,
their ``needs``, the deploy steps): edit a workflow and the figure follows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scripts.figures.draw import Arrow, Box, Diagram

#: Steps of a deploy shown in each stack's box (set-up steps are left out).
SHOWN_STEPS = ("Promote", "pulumi up", "Health gate", "Benchmark")


def _load(root: Path, name: str) -> dict[str, Any]:
    data = yaml.safe_load((root / ".github" / "workflows" / name).read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)


def diagram(root: Path) -> Diagram:
    """The workflows of the project in ``root``."""
    pr = _load(root, "pull-request.yml").get("jobs") or {}
    deploy = _load(root, "deploy.yml").get("jobs") or {}
    stack_jobs = _load(root, "deploy-stack.yml").get("jobs") or {}
    steps = [
        str(s.get("name"))
        for job in stack_jobs.values()
        for s in job.get("steps", [])
        if any(str(s.get("name", "")).startswith(p) for p in SHOWN_STEPS)
    ]
    boxes = [Box("pr", "pull request", (), "input"), Box("main", "push to main", (), "input")]
    arrows: list[Arrow] = []
    for name, job in pr.items():
        matrix = ((job.get("strategy") or {}).get("matrix") or {}).get("stack")
        stacks = (f"stacks: {', '.join(matrix)}",) if matrix else ()
        boxes.append(Box(f"pr:{name}", f"{name} (pull-request.yml)", stacks, "control"))
        needs = _needs(job)
        for n in needs:
            arrows.append(Arrow(f"pr:{n}", f"pr:{name}", f"after {n} passed"))
        if not needs:
            arrows.append(Arrow("pr", f"pr:{name}", "triggers"))
    for name, job in deploy.items():
        inputs = job.get("with") or {}
        source = inputs.get("promote-from")
        shown = [s for s in steps if source or not s.startswith("Promote")]
        lines = [f"stack {inputs.get('stack', name)}", *shown]
        boxes.append(Box(f"deploy:{name}", f"{name} (deploy.yml)", tuple(lines), "compute"))
        needs = _needs(job)
        for n in needs:
            label = f"promotes what {source} verified" if source else f"after {n} passed"
            arrows.append(Arrow(f"deploy:{n}", f"deploy:{name}", label))
        if not needs:
            arrows.append(Arrow("main", f"deploy:{name}", "triggers"))
    return Diagram(
        "Pull requests and promotion: the workflows' jobs",
        boxes,
        arrows,
        caption="a job runs after the job pointing to it succeeded; a failed gate stops the chain",
    )
