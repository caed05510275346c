"""A Pulumi resource hook that fails ``pulumi up`` when the deployed model is not serving.

The only module of this package that imports pulumi. Bind the hook to a stack's serving resource
(the Cloud Run v2 service) with :func:`health_hook_binding`; after the resource is created or
updated, the engine calls the hook, which runs the same checks as the CLI against the URL from
the resource's outputs (``uri`` for Cloud Run v2, or ``url``) and raises
:class:`HealthCheckFailedError` with every failed check's reason when one fails. Hooks do not run
during ``pulumi preview``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi

from endpoint.auth import AuthStrategy
from endpoint.redact import redact
from endpoint.targets import AuthFactory, resolve_auth, url_from_outputs
from serving.catalog.hardware import HARDWARE

from .checks import Backoff
from .runner import HealthReport, run_health_checks

__all__ = [
    "COLD_START_DEADLINE_S",
    "AuthFactory",
    "HealthCheckFailedError",
    "health_hook",
    "health_hook_binding",
    "resolve_auth",
    "url_from_outputs",
]


COLD_START_DEADLINE_S: Mapping[str, float] = {
    profile.accelerator: float(profile.cold_start_deadline_seconds) for profile in HARDWARE.values()
}
"""Hook deadlines per accelerator, from the hardware catalog (sized for each cold start)."""

_URL_KEYS = ("uri", "url")


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
    request_timeout_s: float = 120.0,
    backoff: Backoff | None = None,
    on_dry_run: bool = False,
    refused_grace_s: float | None = None,
) -> pulumi.ResourceHook:
    """A named :class:`pulumi.ResourceHook` running the health checks.

    ``auth``: an :class:`~endpoint.auth.AuthStrategy`, or a factory given the endpoint URL;
    default a Google ID token whose audience is the URL (private Cloud Run services).
    ``url``: a fixed endpoint; by default the first of ``url_keys`` in the resource's new
    outputs. ``deadline_s``: the whole budget, cold start included (see
    :data:`COLD_START_DEADLINE_S`). ``refused_grace_s``: how long refused connections are
    waited on (default: the whole deadline, as vLLM keeps its port closed while it loads). Every
    message the hook logs or raises passes :func:`endpoint.redact`. Must be created inside a
    Pulumi program (or under mocks).
    """
    if deadline_s <= 0:
        raise ValueError(f"deadline_s must be positive, got {deadline_s}")

    async def post_deploy_health_check(args: pulumi.ResourceHookArgs) -> None:
        """Run the health checks against the resource's URL; raise when one fails."""
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
            request_timeout_s=request_timeout_s,
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
        pulumi.log.info(
            redact(
                f"{args.name}: {served_model_name} is serving at {target}"
                + (f" ({chat.detail})" if chat is not None else "")
            )
        )

    return pulumi.ResourceHook(
        name, post_deploy_health_check, pulumi.ResourceHookOptions(on_dry_run=on_dry_run)
    )


def health_hook_binding(hook: pulumi.ResourceHook) -> pulumi.ResourceHookBinding:
    """Run ``hook`` after the resource is created and after it is updated."""
    return pulumi.ResourceHookBinding(after_create=[hook], after_update=[hook])
