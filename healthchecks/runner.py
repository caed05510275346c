"""Run every check in order against one endpoint, under one deadline."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from endpoint.auth import AuthStrategy
from endpoint.client import make_client
from endpoint.limits import READY_DEADLINE_S
from endpoint.redact import redact

from .checks import (
    DEFAULT_PROMPT,
    Backoff,
    CheckResult,
    ProgressCallback,
    check_chat,
    check_metrics,
    check_models,
    check_ready,
)


@dataclass(frozen=True)
class HealthReport:
    """All check results for one endpoint."""

    url: str
    served_model_name: str
    auth: str
    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        """True only when every check passed."""
        return bool(self.results) and all(r.ok for r in self.results)

    def failure_summary(self) -> str:
        """``name: detail`` for each failed check, joined by ``; ``."""
        failed = (f"{r.name}: {r.detail}" for r in self.results if not r.ok)
        return redact("; ".join(failed), limit=4000)

    def as_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "served_model_name": self.served_model_name,
            "auth": self.auth,
            "ok": self.ok,
            "checks": [r.as_dict() for r in self.results],
        }


async def _bounded(
    name: str,
    deadline: float,
    make: Callable[[], Awaitable[CheckResult]],
    grace_s: float = 0.0,
) -> CheckResult:
    """Run one check within what is left of the deadline (plus ``grace_s``); never raises."""
    started = time.perf_counter()
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return CheckResult(name, False, "not reached: the deadline had passed", 0.0)
    try:
        return await asyncio.wait_for(make(), timeout=remaining + grace_s)
    except TimeoutError:
        return CheckResult(
            name,
            False,
            f"timed out: no answer within the {remaining:.1f} s left of the deadline",
            time.perf_counter() - started,
        )
    except Exception as exc:  # last resort: a failed check, never a traceback
        return CheckResult(
            name,
            False,
            f"unexpected error: {type(exc).__name__}: {redact(exc)}",
            time.perf_counter() - started,
        )


MIN_RETRY_WAIT_S = 0.5
"""The least wait between two tries of a check told to retry ("Retry-After: 0" is no loop)."""
MAX_TRIES = 30
"""The most tries of one check told to retry (the deadline usually ends them first)."""


async def _honouring_retry_after(
    name: str,
    deadline: float,
    make: Callable[[], Awaitable[CheckResult]],
    progress: ProgressCallback | None,
) -> CheckResult:
    """Run one check; while it fails with a 429 or 503 whose ``Retry-After`` ends within the
    deadline, wait what the server asks and run it again (as readiness does). A wait past the
    deadline ends the check with the last answer and says so."""
    result = await _bounded(name, deadline, make)
    for _ in range(MAX_TRIES - 1):
        wait_for = result.data.get("retry_after_s") if not result.ok else None
        if not isinstance(wait_for, int | float):
            return result
        wait_for = max(float(wait_for), MIN_RETRY_WAIT_S)
        left = deadline - time.monotonic()
        if wait_for >= left:
            return dataclasses.replace(
                result,
                detail=f"{result.detail}; its Retry-After ({wait_for:g} s) ends past the "
                f"deadline ({max(left, 0):.1f} s left)",
            )
        if progress is not None:
            progress(f"{name}: HTTP {result.data.get('status')}, retrying in {wait_for:g} s")
        await asyncio.sleep(wait_for)
        result = await _bounded(name, deadline, make)
    return result


async def run_health_checks(
    url: str,
    served_model_name: str,
    *,
    auth: AuthStrategy | None = None,
    deadline_s: float = READY_DEADLINE_S,
    request_timeout_s: float = 120.0,
    backoff: Backoff | None = None,
    progress: ProgressCallback | None = None,
    prompt: str = DEFAULT_PROMPT,
    max_tokens: int = 32,
    refused_grace_s: float | None = None,
) -> HealthReport:
    """readiness, models, chat, metrics, in that order, all within ``deadline_s`` seconds (a
    cold start included); when readiness fails the others are "not reached". URLs and texts in
    the report are redacted."""
    deadline = time.monotonic() + deadline_s
    timeout = max(0.1, min(request_timeout_s, deadline_s))
    results: list[CheckResult] = []
    async with make_client(url, auth=auth, timeout_s=timeout, max_concurrency=2) as client:
        ready = await _bounded(
            "readiness",
            deadline,
            lambda: check_ready(
                client,
                deadline=deadline,
                backoff=backoff,
                progress=progress,
                refused_grace_s=refused_grace_s,
            ),
            grace_s=1.0,  # readiness watches the deadline itself and reports its last status
        )
        results.append(ready)
        # Every check honours a 429's (or 503's) Retry-After within the deadline.
        checks: tuple[tuple[str, Callable[[], Awaitable[CheckResult]]], ...] = (
            ("models", lambda: check_models(client, served_model_name)),
            (
                "chat",
                lambda: check_chat(client, served_model_name, prompt=prompt, max_tokens=max_tokens),
            ),
            ("metrics", lambda: check_metrics(client)),
        )
        for name, make in checks:
            if not ready.ok:
                results.append(CheckResult(name, False, "not reached: readiness failed", 0.0))
            else:
                results.append(await _honouring_retry_after(name, deadline, make, progress))
    description = auth.description if auth is not None else "none"
    return HealthReport(
        redact(url), redact(served_model_name, limit=300), description, tuple(results)
    )
