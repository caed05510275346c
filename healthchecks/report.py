"""Human (rich table) and machine (JSON) forms of health reports."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .runner import HealthReport


def print_table(report: HealthReport, console: Console) -> None:
    """One row per check: name, PASS/FAIL, time, detail."""
    verdict = "[green]healthy[/green]" if report.ok else "[red]NOT healthy[/red]"
    table = Table(
        title=(
            f"{escape(report.url)} ({escape(report.served_model_name)}, "
            f"auth: {escape(report.auth)}): {verdict}"
        ),
        title_justify="left",
        expand=False,
    )
    table.add_column("check")
    table.add_column("result")
    table.add_column("time", justify="right")
    table.add_column("detail", overflow="fold")
    for result in report.results:
        if not result.ok:
            mark = "[red]FAIL[/red]"
        else:
            mark = "[yellow]WARN[/yellow]" if result.warnings else "[green]PASS[/green]"
        table.add_row(Text(result.name), mark, f"{result.duration_s:.2f} s", Text(result.detail))
    console.print(table)


def reports_to_json(reports: Sequence[HealthReport]) -> str:
    """``{"ok": all passed, "targets": [report, ...]}`` as indented JSON."""
    document: dict[str, Any] = {
        "ok": bool(reports) and all(r.ok for r in reports),
        "targets": [r.as_dict() for r in reports],
    }
    return json.dumps(document, indent=2)
