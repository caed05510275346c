"""The wire format of a server, reduced to its shape, so a fake can be compared with vLLM. Pure.

A *shape* keeps what a client depends on and drops what differs between any two answers: JSON
keys and value types (a whole float is ``"int"``), lists as the union of their items' shapes,
the HTTP status, vLLM's error ``type``, ``param`` and ``code``, and a stream's distinct event
kinds in order of first appearance. A field only one side sends is a difference either way (a
client may come to depend on it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Exchange", "differences", "exchange", "shape", "stream_shape"]


def shape(value: Any) -> Any:
    """The shape of a JSON value (see the module docstring)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "int" if value.is_integer() else "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, Mapping):
        return {str(k): shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        merged: dict[str, Any] = {}
        for item in value:
            s = shape(item)
            merged[json.dumps(s, sort_keys=True)] = s
        return [merged[k] for k in sorted(merged)]
    return type(value).__name__


def _kind(event: Any) -> str:
    if event == "[DONE]":
        return "done"
    if not isinstance(event, Mapping):
        return "other"
    if "error" in event:
        return "error"
    choices = event.get("choices")
    if not choices:
        return "usage" if event.get("usage") is not None else "empty"
    choice = choices[0] if isinstance(choices, list) and choices else {}
    delta = choice.get("delta", {}) if isinstance(choice, Mapping) else {}
    if isinstance(delta, Mapping) and delta.get("role"):
        return "role"
    if isinstance(choice, Mapping) and choice.get("finish_reason"):
        return "finish"
    return "content"


def stream_shape(body: str) -> list[tuple[str, Any]]:
    """``[(kind, shape)]`` of a server-sent-events body, one per distinct kind, in order of
    first appearance."""
    seen: dict[str, Any] = {}
    for line in body.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        event: Any = data if data == "[DONE]" else json.loads(data)
        kind = _kind(event)
        if kind not in seen:
            seen[kind] = shape(event) if kind != "done" else "[DONE]"
    return list(seen.items())


@dataclass(frozen=True)
class Exchange:
    """One request and the shape of its answer."""

    name: str
    status: int
    content_type: str
    body: Any
    """The body's shape (a stream shape for ``text/event-stream``)."""
    error: Mapping[str, Any] | None = None
    """vLLM's error ``type``, ``param`` and ``code`` (the message is the server's words)."""


def exchange(name: str, status: int, content_type: str, text: str) -> Exchange:
    """An :class:`Exchange` from a raw answer."""
    kind = content_type.split(";")[0].strip()
    if kind == "text/event-stream":
        return Exchange(name, status, kind, stream_shape(text))
    try:
        data = json.loads(text)
    except ValueError:
        return Exchange(name, status, kind, "not JSON")
    error = None
    if isinstance(data, Mapping) and isinstance(data.get("error"), Mapping):
        e = data["error"]
        error = {"type": e.get("type"), "param": e.get("param"), "code": e.get("code")}
    return Exchange(name, status, kind, shape(data), error)


def _diff(path: str, real: Any, fake: Any, out: list[str]) -> None:
    if isinstance(real, dict) and isinstance(fake, dict):
        for key in sorted(set(real) | set(fake)):
            where = f"{path}.{key}"
            if key not in fake:
                out.append(f"{where}: the real server sends it ({_show(real[key])}), the fake not")
            elif key not in real:
                out.append(f"{where}: the fake sends it ({_show(fake[key])}), the real server not")
            else:
                _diff(where, real[key], fake[key], out)
        return
    if isinstance(real, list) and isinstance(fake, list):
        if len(real) == 1 and len(fake) == 1:
            _diff(f"{path}[]", real[0], fake[0], out)
        elif real != fake and not (real and not fake) and not (fake and not real):
            out.append(f"{path}[]: items are {_show(fake)} in the fake, {_show(real)} for real")
        return
    if real != fake:
        # A number that is whole in one answer and not in another is the same field.
        if {real, fake} == {"int", "float"}:
            return
        out.append(f"{path}: {_show(fake)} in the fake, {_show(real)} for real")


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def differences(real: Exchange, fake: Exchange, *, ignore: Sequence[str] = ()) -> list[str]:
    """Where ``fake`` does not answer as ``real`` did, one sentence each, ``name`` first.
    ``ignore``: paths (as printed, e.g. ``$.choices[].logprobs``) not compared."""
    out: list[str] = []
    if real.status != fake.status:
        out.append(f"HTTP status {fake.status} in the fake, {real.status} for real")
    if real.content_type != fake.content_type:
        out.append(f"content type {fake.content_type} in the fake, {real.content_type} for real")
    if real.error != fake.error:
        out.append(f"error: {_show(fake.error)} in the fake, {_show(real.error)} for real")
    if isinstance(real.body, list) and real.content_type == "text/event-stream":
        real_kinds = [k for k, _ in real.body]
        fake_kinds = [k for k, _ in fake.body] if isinstance(fake.body, list) else []
        if real_kinds != fake_kinds:
            out.append(f"stream events {fake_kinds} in the fake, {real_kinds} for real")
        fake_by_kind = dict(fake.body) if isinstance(fake.body, list) else {}
        for kind, real_shape in real.body:
            if kind in fake_by_kind:
                _diff(f"$<{kind}>", real_shape, fake_by_kind[kind], out)
    else:
        _diff("$", real.body, fake.body, out)
    kept = [
        d for d in out if not any(d.startswith(p + ":") or d.startswith(p + ".") for p in ignore)
    ]
    return [f"{fake.name}: {d}" for d in kept]


def REQUESTS(model: str, max_model_len: int) -> list[tuple[str, str, str, Any]]:
    """The requests sent to the real server and to a fake alike: ``(name, method, path,
    JSON body)``. They cover what the package's clients read: readiness, the model list, a
    streamed completion and chat with usage (the benchmark and the health check), a plain
    completion, ``/tokenize`` (the prompt builder), and the errors a client must tell apart:
    an unknown model and a prompt over ``max_model_len``."""
    stream = {"include_usage": True, "continuous_usage_stats": True}
    words = " ".join(["time"] * 16)
    too_long = " ".join(["time"] * (max_model_len + 16))
    return [
        ("GET /health", "GET", "/health", None),
        ("GET /v1/models", "GET", "/v1/models", None),
        (
            "streamed completion",
            "POST",
            "/v1/completions",
            {"model": model, "prompt": words, "max_tokens": 4, "temperature": 0.0,
             "stream": True, "stream_options": stream, "ignore_eos": True},
        ),
        (
            "streamed chat",
            "POST",
            "/v1/chat/completions",
            {"model": model, "messages": [{"role": "user", "content": words}], "max_tokens": 4,
             "temperature": 0, "stream": True, "stream_options": {"include_usage": True}},
        ),
        (
            "completion",
            "POST",
            "/v1/completions",
            {"model": model, "prompt": words, "max_tokens": 4, "temperature": 0.0},
        ),
        ("tokenize", "POST", "/tokenize", {"model": model, "prompt": words}),
        (
            "unknown model",
            "POST",
            "/v1/completions",
            {"model": "no-such-model", "prompt": words, "max_tokens": 4},
        ),
        (
            "prompt over max_model_len",
            "POST",
            "/v1/completions",
            {"model": model, "prompt": too_long, "max_tokens": 4},
        ),
    ]  # fmt: skip


#: Differences between the real server and the fake that were looked at and are kept, by
#: request, as path prefixes, each with why: anything else that differs fails engine-check.
KNOWN: dict[str, tuple[str, ...]] = {}


def metric_differences(
    fake_name: str, real: Mapping[str, set[str]], fake: Mapping[str, set[str]]
) -> list[str]:
    """Every ``vllm:`` family or sample a fake exports that the real server does not, or with
    other label names (both as :func:`enginecheck.metricnames.exported` reads them)."""
    out: list[str] = []
    for name in sorted(n for n in fake if n.startswith("vllm:")):
        if name not in real:
            out.append(f"{fake_name}: exports {name}, the real server does not")
        elif fake[name] != real[name]:
            out.append(
                f"{fake_name}: {name} has labels {sorted(fake[name])}, the real server's "
                f"{sorted(real[name])}"
            )
    return out
