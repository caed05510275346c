"""Extract the Prometheus metric families a vLLM release exports, from that release's source.

    python scripts/vllm_metric_names.py VLLM_PACKAGE_DIR VERSION > tests/data/vllm-VER-metrics.json

Reads every `self._counter_cls(...)`, `_gauge_cls` and `_histogram_cls` call of
`vllm/v1/metrics/loggers.py` and `vllm/v1/spec_decode/metrics.py` with `ast`; the monitoring
tests check every PromQL query against the families, kinds and labels it lists."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

SOURCES = ("v1/metrics/loggers.py", "v1/spec_decode/metrics.py")
KINDS = {"_counter_cls": "counter", "_gauge_cls": "gauge", "_histogram_cls": "histogram"}


def _kind(call: ast.Call) -> str | None:
    return KINDS.get(call.func.attr) if isinstance(call.func, ast.Attribute) else None


def _name_argument(call: ast.Call) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == "name"), None)


def _strings(node: ast.expr | None) -> list[str]:
    if node is None:
        return []
    return [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def _extra_labels(call: ast.Call, function: ast.AST) -> list[str]:
    """Literal label names in the call's `labelnames=` (or in the variable it names)."""
    value = next((k.value for k in call.keywords if k.arg == "labelnames"), None)
    if isinstance(value, ast.Name):
        assigned = [
            a.value
            for a in ast.walk(function)
            if isinstance(a, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == value.id for t in a.targets)
        ]
        return sorted({s for a in assigned for s in _strings(a)})
    return sorted(set(_strings(value)))


def families(source: str) -> dict[str, dict[str, object]]:
    """{family name: {"kind": ..., "labels": [...]}} for one module's source."""
    found: dict[str, dict[str, object]] = {}
    tree = ast.parse(source)
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        loop_kinds: set[str] = set()
        for node in ast.walk(function):
            if not isinstance(node, ast.Call) or (kind := _kind(node)) is None:
                continue
            argument = _name_argument(node)
            labels = _extra_labels(node, function)
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                found[argument.value] = {"kind": kind, "labels": labels}
            elif isinstance(argument, ast.Name):
                loop_kinds.add(kind)
        if len(loop_kinds) > 1:
            raise ValueError(f"{function.name}: names from variables of several kinds")
        for node in ast.walk(function):
            if (
                loop_kinds
                and isinstance(node, ast.Tuple)
                and node.elts
                and isinstance(node.elts[0], ast.Constant)
                and isinstance(node.elts[0].value, str)
                and node.elts[0].value.startswith("vllm:")
            ):
                found[node.elts[0].value] = {"kind": next(iter(loop_kinds)), "labels": []}
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    package, version = Path(argv[1]), argv[2]
    metrics: dict[str, dict[str, object]] = {}
    for relative in SOURCES:
        metrics.update(families((package / relative).read_text()))
    if not metrics:
        print(f"no metric families found under {package}", file=sys.stderr)
        return 1
    document = {
        "vllm_version": version,
        "sources": [f"vllm/{relative}" for relative in SOURCES],
        "common_labels": ["model_name", "engine"],
        "families": dict(sorted(metrics.items())),
    }
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
