"""From ``Pulumi.<stack>.yaml`` to the ``vllm serve`` command line and the policy verdicts, drawn
from one real ``gemma4 preview``."""

from __future__ import annotations

import shlex
from collections import Counter
from pathlib import Path
from typing import Any

from scripts.figures.draw import Arrow, Box, Diagram

#: At most this many stack-file keys are listed (the rest are counted).
MAX_KEYS = 8


def command_lines(command: str) -> tuple[str, ...]:
    """``vllm serve MODEL --flag value ...`` one flag per line, as a reader scans it."""
    words = shlex.split(command)
    lines: list[str] = []
    for word in words:
        if word.startswith("--") or not lines:
            lines.append(word)
        else:
            lines[-1] += " " + (shlex.quote(word) if len(word) < 48 else word[:45] + "...")
    return tuple(lines)


def diagram(p: Any, root: Path) -> Diagram:
    """The preview ``p`` (a :class:`preview.build.Preview`) of a stack of the project in
    ``root`` as a path of boxes."""
    from preview.harness import stack_config

    config = stack_config(p.stack, root)
    shown = [f"{k}: {v}" for k, v in list(config.items())[:MAX_KEYS]]
    if len(config) > MAX_KEYS:
        shown.append(f"... {len(config) - MAX_KEYS} more keys")
    custom = sum(1 for r in p.resources if r.custom)
    verdicts = Counter(v.verdict for v in p.policies)
    fits = p.fits
    boxes = [
        Box("file", f"Pulumi.{p.stack}.yaml", tuple(shown), "input"),
        Box(
            "settings",
            "typed settings",
            ("every key checked, defaults filled", "(serving settings models)"),
            "control",
        ),
        Box(
            "program",
            "Pulumi program under mocks",
            (
                f"{len(p.resources)} resources: {custom} in the cloud, "
                f"{len(p.resources) - custom} components",
                "no CLI, no cloud, no credentials",
            ),
            "network",
        ),
        Box("argv", "vllm serve command line", command_lines(p.vllm_command_line or ""), "compute"),
        Box(
            "policies",
            f"policy pack: {len(p.policies)} policies",
            (
                f"{verdicts.get('pass', 0)} pass, {verdicts.get('fail', 0)} fail, "
                f"{verdicts.get('disabled', 0)} disabled",
            ),
            "verdict",
        ),
        Box(
            "plan",
            "capacity plan",
            ("the model fits the accelerator" if fits else "the model does NOT fit",),
            "verdict",
        ),
        Box(
            "verdict",
            "gemma4 preview: " + ("would deploy (exit 0)" if p.ok else "refused (exit 1)"),
            (),
            "verdict",
        ),
    ]
    mandatory = p.mandatory_violations
    arrows = [
        Arrow("file", "settings", "read as the Pulumi CLI reads it"),
        Arrow("settings", "argv", "rendered"),
        Arrow("argv", "program", "container args", dashed=True),
        Arrow("program", "policies", "resource inputs"),
        Arrow("settings", "plan", "weights + KV cache in memory?"),
        Arrow("policies", "verdict", f"{mandatory} mandatory violation" + "s" * (mandatory != 1)),
        Arrow("plan", "verdict", "must fit"),
    ]
    return Diagram(
        f"Stack {p.stack}: from the stack file to the command line and the verdicts",
        boxes,
        arrows,
        caption="every box is what `gemma4 preview -s " + p.stack + "` computes offline",
    )
