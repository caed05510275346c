"""``python -m scripts.figures OUT_DIR``: draw every documentation figure into OUT_DIR."""

from __future__ import annotations

import sys
from pathlib import Path

from scripts.figures import write_all


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m scripts.figures OUT_DIR", file=sys.stderr)
        return 2
    for path in write_all(Path(argv[0])):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
