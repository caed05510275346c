"""A Pulumi resource hook that fails ``pulumi up`` when the deployed model is not serving: after
the serving resource is created or updated it runs the CLI's checks against the URL from the
resource's outputs and raises :class:`HealthCheckFailedError` with each failed check's reason.
Hooks do not run during ``pulumi preview``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import pulumi

from endpoint.auth import AuthStrategy
from endpoint.redact import redact
from endpoint.targets import AuthFactory, resolve_auth, url_from_outputs

from .checks import Backoff
from .runner import HealthReport, run_health_checks

__all__ = ["AuthFactory", "HealthCheckFailedError", "first_token_at", "health_hook"]

_URL_KEYS = ("uri", "url")
#: Told the time of the first token of a passed check (the cold start's end, docs/cold-start.md).
FirstToken = Callable[[pulumi.ResourceHookArgs, datetime], None]


class HealthCheckFailedError(Exception):
    """A post-deploy health check failed; the message lists each failed check and why."""

    def __init__(self, message: str, report: HealthReport | None = None) -> None:
        super().__init__(message)
        self.report = report


def health_hook(
    name: str,
    *,
    served_model_name: str,
    deadline_s: float,
    auth: AuthStrategy | AuthFactory | None = None,
    url: str | None = None,
    url_keys: Sequence[str] = _URL_KEYS,
    backoff: Backoff | None = None,
    refused_grace_s: float | None = None,
    on_first_token: FirstToken | None = None,
) -> pulumi.ResourceHook:
    """``auth``: a strategy, or a factory given the URL (default: a Google ID token for it).
    ``url``: a fixed endpoint, else the first of ``url_keys`` in the resource's outputs.
    ``deadline_s``: the whole budget, cold start included. ``on_first_token``: told when the
    chat check's first token came, once every check passed."""

    async def post_deploy_health_check(args: pulumi.ResourceHookArgs) -> None:
        target = url or url_from_outputs(args.new_outputs, url_keys)
        if target is None:
            raise HealthCheckFailedError(
                f"health check of {args.name}: no endpoint URL in the resource's outputs "
                f"(looked for {', '.join(url_keys)})"
            )
        strategy = resolve_auth(auth, target)
        report = await run_health_checks(
            target,
            served_model_name,
            auth=strategy,
            deadline_s=deadline_s,
            backoff=backoff,
            progress=lambda line: pulumi.log.info(redact(f"{args.name}: {line}"), ephemeral=True),
            refused_grace_s=refused_grace_s,
        )
        if not report.ok:
            raise HealthCheckFailedError(
                redact(
                    f"post-deploy health check of {args.name} ({target}) failed: "
                    f"{report.failure_summary()}",
                    limit=4000,
                ),
                report,
            )
        chat = next((r for r in report.results if r.name == "chat"), None)
        first = first_token_at(report, datetime.now(UTC))
        if on_first_token is not None and first is not None:
            on_first_token(args, first)
        pulumi.log.info(
            redact(
                f"{args.name}: {served_model_name} is serving at {target}"
                + (f" ({chat.detail})" if chat is not None else "")
            )
        )

    return pulumi.ResourceHook(name, post_deploy_health_check)


def first_token_at(report: HealthReport, ended: datetime) -> datetime | None:
    """When the chat check's first token came, by the hook's clock: ``ended`` (the checks' end)
    less the checks after the chat and the chat's own time after its first token."""
    names = [r.name for r in report.results]
    if "chat" not in names:
        return None
    chat = report.results[names.index("chat")]
    ttft = chat.data.get("ttft_s")
    if not chat.ok or not isinstance(ttft, int | float):
        return None
    after = sum(r.duration_s for r in report.results[names.index("chat") + 1 :])
    return ended - timedelta(seconds=after + chat.duration_s - ttft)
