"""Why a real engine that was started exited, and whose it is: the machine's (a refusal of
vLLM's CPU backend naming the CPU, a ``_C`` operator this CPU's kernel library lacks, an
illegal instruction, a process the system killed: never reported as the stack's), the command
line's (vLLM's parser or configuration refusing a value) or otherwise the engine's, with the
flags it names. Every rendered line was read by vLLM's real parser before it was started, so
this judges only starts that then failed, from vLLM's last words in its log. Pure.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["StartFailure", "classify", "last_reason", "named_flags"]

#: vLLM's log prefixes a line with the process it came from, e.g. ``(Worker pid=12) ERROR ...``.
_PROCESS = re.compile(r"^\(\w+ pid=\d+\) ?")
_LOG_HEAD = re.compile(r"^(?:ERROR|WARNING|INFO|DEBUG) \d\d-\d\d [\d:]+ \[[^\]]+\]\s*")
_REASON = re.compile(r"error: |Error: |Error\(|Exception: |NotImplementedError|Illegal instruction")

_MACHINE = (
    # vllm/v1/attention/backends/cpu_attn.py, and the CPU backend's other refusals of a CPU.
    re.compile(r"NotImplementedError: .*\b(?:on CPU requires|requires x86|AVX-?512|AMX)\b"),
    # A kernel this CPU's library (_C_AVX2, say) does not register.
    re.compile(r"AttributeError: '_OpNamespace' '_C' object has no attribute '\w+'"),
    re.compile(r"\bIllegal instruction\b"),
)
_LINE = re.compile(r"(?:^|\s)(?:vllm(?: serve)?: error: |argument --)|ValidationError|ValueError")


@dataclass(frozen=True)
class StartFailure:
    whose: str
    """``machine``, ``command line`` or ``engine``."""
    message: str


def last_reason(log: str) -> str:
    """vLLM's last line that states an error, without its process and log prefixes, with the
    indented lines that continue it (pydantic's ``Value error, ...`` under a ValidationError)."""
    lines = [_LOG_HEAD.sub("", _PROCESS.sub("", x)).rstrip() for x in log.splitlines()]
    lines = [x for x in lines if x.strip()]
    if not lines:
        return "no output"
    at = next((i for i in range(len(lines) - 1, -1, -1) if _REASON.search(lines[i])), None)
    if at is None:
        return lines[-1].strip()[:600]
    said = [lines[at].strip()]
    for line in lines[at + 1 : at + 3]:
        if not line.startswith((" ", "\t")) or line.strip().startswith(("File ", "For further")):
            break
        said.append(line.strip())
    return " ".join(said)[:600]


def named_flags(reason: str, argv: Sequence[str]) -> list[str]:
    """The options of ``argv`` that ``reason`` names (as ``--max-model-len`` or
    ``max_model_len``), each once, in ``argv``'s order."""
    named = []
    for token in argv:
        if token.startswith("--"):
            opt = token.split("=", 1)[0]
            # Whole words only: `dtype` is not named by `kv_cache_dtype`, `port` by `support`.
            spelled = (re.escape(opt), re.escape(opt[2:].replace("-", "_")))
            if opt not in named and any(
                re.search(rf"(?<![\w-]){s}(?![\w-])", reason) for s in spelled
            ):
                named.append(opt)
    return named


def classify(log: str, returncode: int, argv: Sequence[str], machine: str) -> StartFailure:
    """Whose is the failed start of ``argv`` (exit ``returncode``, output ``log``) on the
    machine described by ``machine`` (its CPU, flags and what the engine reports)."""
    if returncode in (-signal.SIGKILL, 128 + signal.SIGKILL, -signal.SIGILL, 128 + signal.SIGILL):
        killed = signal.Signals(abs(returncode) % 128).name
        why = (
            "an instruction this CPU does not have"
            if killed == "SIGILL"
            else "the system (out of memory, most often)"
        )
        return StartFailure(
            "machine",
            f"this machine stopped the engine ({killed}: {why}); machine: {machine}",
        )
    reason = last_reason(log)
    machine_lines = [x for x in log.splitlines() if any(p.search(x) for p in _MACHINE)]
    if machine_lines:
        said = last_reason(machine_lines[-1])
        return StartFailure(
            "machine",
            f"this machine cannot run what the engine was started with: {said}; machine: "
            f"{machine} (not the stack's command line: vLLM's parser accepted it)",
        )
    named = named_flags(reason, argv)
    flags = f"; flag(s) named: {', '.join(named)}" if named else ""
    if _LINE.search(reason):
        return StartFailure(
            "command line",
            f"the real engine exited ({returncode}) and refused the command line: {reason}{flags}",
        )
    return StartFailure(
        "engine", f"the real engine exited ({returncode}) at start: {reason}{flags}"
    )
