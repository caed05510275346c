"""Regenerate the generated part of docs/performance-model.md from serving/capacity/perf_checks.py.

    .venv/bin/python scripts/perf_docs.py           # rewrite the block in place
    .venv/bin/python scripts/perf_docs.py --check   # exit 1 when the page is stale

tests/test_perf_docs.py runs the check, so the page cannot drift from the model.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serving.capacity.perf_checks import BEGIN, END, render_markdown  # noqa: E402

PAGE = ROOT / "docs" / "performance-model.md"


def updated(text: str) -> str:
    """``text`` with its generated block replaced by a fresh one."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{PAGE}: no generated block ({BEGIN} ... {END})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + render_markdown() + tail


def main(argv: list[str]) -> int:
    text = PAGE.read_text(encoding="utf-8")
    fresh = updated(text)
    if "--check" in argv:
        if fresh != text:
            print(f"{PAGE} is stale: run .venv/bin/python scripts/perf_docs.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
