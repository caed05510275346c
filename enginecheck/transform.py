"""The one transform from a stack's rendered `vllm serve` argv to one a CPU can run.

Pure. Everything a stack renders is kept as rendered except what a CPU cannot honour, and each
replacement is returned as a :class:`Change` (printed by engine-check):

- the model path (a bucket mount or a Hub id) becomes a tiny local checkpoint of the same
  architecture, and the drafter in ``--speculative-config`` a local drafter (its Hub
  ``revision`` goes: a local path has none);
- device memory: ``--gpu-memory-utilization`` (a fraction of host memory on a CPU) becomes
  ``--kv-cache-memory-bytes``, which sizes the KV cache directly;
- device count: ``--tensor-parallel-size`` above 1 becomes 1 (one CPU process);
- ``--revision`` / ``--tokenizer-revision`` (TPU nodes download from the Hub) go, for the same
  reason as the drafter's revision;
- ``--host`` / ``--port``: loopback and a free port (tests talk to 127.0.0.0/8 only).

Every other token is passed on as rendered, an option the pinned vLLM does not know included
(the real engine must be the one to refuse it). An argv it cannot read (not ``vllm serve``, a
second positional argument, no model) is a :class:`TransformError` naming the token.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from serving.launch.vllm_argv import OPTIONS

__all__ = ["Change", "CpuTarget", "TransformError", "cpu_argv", "describe"]

#: Options whose value is replaced (or which are dropped), by canonical name.
_DROPPED = {
    "revision": "a local checkpoint has no Hub revision",
    "tokenizer-revision": "a local checkpoint has no Hub revision",
}


class TransformError(ValueError):
    """The rendered argv holds something the transform cannot read; the message names it."""


@dataclass(frozen=True)
class CpuTarget:
    """What replaces the device-bound parts of the argv."""

    model_dir: str
    port: int
    """0: chosen when the server starts (the argv then carries ``--port=0`` until then)."""
    kv_cache_bytes: int
    drafter_dir: str | None = None
    host: str = "127.0.0.1"


@dataclass(frozen=True)
class Change:
    """One replacement: the option, its rendered value, what runs instead (None: dropped)."""

    option: str
    rendered: str | None
    runs: str | None
    why: str


def _split(token: str) -> tuple[str, str | None]:
    name, eq, value = token[2:].partition("=")
    return name.replace("_", "-"), (value if eq else None)


def _speculative(value: str, target: CpuTarget) -> tuple[str, list[Change]]:
    try:
        config = json.loads(value)
    except ValueError:
        raise TransformError(f"--speculative-config is not JSON: {value[:80]!r}") from None
    if not isinstance(config, dict):
        raise TransformError("--speculative-config is not a JSON object")
    changes: list[Change] = []
    if "model" in config:
        if target.drafter_dir is None:
            raise TransformError(
                "--speculative-config names a drafter model but no local drafter was given"
            )
        changes.append(
            Change(
                "--speculative-config model",
                str(config["model"]),
                target.drafter_dir,
                "the drafter: a tiny local drafter made for the tiny model",
            )
        )
        config["model"] = target.drafter_dir
    if "revision" in config:
        changes.append(
            Change(
                "--speculative-config revision",
                str(config.pop("revision")),
                None,
                "a local checkpoint has no Hub revision",
            )
        )
    return json.dumps(config, separators=(",", ":")), changes


def cpu_argv(argv: Sequence[str], target: CpuTarget) -> tuple[list[str], list[Change]]:
    """``argv`` (``vllm serve MODEL --opt=value ...``) made runnable on a CPU, and what changed.

    Options are kept in their rendered order and form; ``--kv-cache-memory-bytes`` takes the
    place of ``--gpu-memory-utilization``.
    """
    items = list(argv)
    if items[:2] != ["vllm", "serve"]:
        raise TransformError(f"not a `vllm serve` command line: {' '.join(items[:2])!r}")
    out = ["vllm", "serve"]
    changes: list[Change] = []
    model_seen = False
    kv_set = False
    i = 2
    while i < len(items):
        token = items[i]
        i += 1
        if not token.startswith("--"):
            if model_seen or token.startswith("-"):
                raise TransformError(f"cannot read {token!r}: a second positional argument")
            model_seen = True
            changes.append(
                Change("model", token, target.model_dir, "the checkpoint: a tiny Gemma 4 made here")
            )
            out.append(target.model_dir)
            continue
        name, value = _split(token)
        if value is None and _takes_value(name):
            if i >= len(items):
                raise TransformError(f"--{name} without a value")
            value = items[i]  # `--opt value`, as vLLM's parser reads it
            i += 1
        if name == "model":
            raise TransformError("--model: give the model as the positional argument")
        if name in _DROPPED:
            changes.append(Change(f"--{name}", value, None, _DROPPED[name]))
            continue
        if name in ("gpu-memory-utilization", "kv-cache-memory-bytes"):
            runs = f"--kv-cache-memory-bytes={target.kv_cache_bytes}"
            changes.append(
                Change(
                    f"--{name}",
                    value,
                    runs,
                    "device memory: on a CPU the fraction is of host memory; the KV cache is "
                    "sized directly",
                )
            )
            if not kv_set:
                out.append(runs)
                kv_set = True
            continue
        if name == "tensor-parallel-size" and value is not None and value.strip() != "1":
            changes.append(Change(f"--{name}", value, "1", "device count: one CPU process"))
            out.append("--tensor-parallel-size=1")
            continue
        if name == "speculative-config":
            if value is None:
                raise TransformError("--speculative-config without a value")
            new, spec_changes = _speculative(value, target)
            changes += spec_changes
            out.append(f"--speculative-config={new}")
            continue
        if name == "host":
            changes.append(Change("--host", value, target.host, "loopback only"))
            out.append(f"--host={target.host}")
            continue
        if name == "port":
            changes.append(Change("--port", value, _port(target), "a free local port"))
            out.append(f"--port={target.port}")
            continue
        out.append(token if value is None or "=" in token else f"--{name}={value}")
    if not model_seen:
        raise TransformError("no positional model in the rendered command line")
    for name, value in (("--host", target.host), ("--port", str(target.port))):
        if not any(c.option == name for c in changes):
            changes.append(
                Change(
                    name, None, value, "loopback only" if name == "--host" else "a free local port"
                )
            )
            out.append(f"{name}={value}")
    return out, changes


def _takes_value(name: str) -> bool:
    """Whether vLLM's own parser (the pinned snapshot) gives ``--name`` a value. An option it
    does not know is passed on as written: the real engine is the judge of it."""
    option = OPTIONS.get(f"--{name}")
    return option is not None and option.takes_value


def _port(target: CpuTarget) -> str:
    return str(target.port) if target.port else "(a free port, chosen at start)"


def describe(changes: Sequence[Change]) -> list[str]:
    """One line per change, for the check's output."""
    lines = []
    for c in changes:
        rendered = "(not rendered)" if c.rendered is None else c.rendered
        runs = "(dropped)" if c.runs is None else c.runs
        lines.append(f"  {c.option}: {rendered} -> {runs}  [{c.why}]")
    return lines
