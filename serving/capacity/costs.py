"""What a cost is wherever one is shown (`gemma4 plan`, the preview, the MCP capacity tool): an
hourly rate and the three figures built from it, per month (730 h), per million requests and
per million output tokens, each with the price's status.

A rate nobody publishes (no figure on Google's page, none quoted by a named source) is unknown:
its figures are None (null in JSON) and print "unknown", never 0 nor "at least $0.00", because
a missing rate is not a free one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from serving.catalog.hardware import status_prefix
from serving.sizing.memory import HOURS_PER_MONTH, cost_per_million_requests

if TYPE_CHECKING:
    from serving.config.settings import Settings

__all__ = ["HOURS_PER_MONTH", "UNKNOWN", "Cost", "cost", "instance_price", "money", "per_million"]

#: The status of a price with no figure anywhere (beside confirmed, estimate and, for a sum
#: that leaves out an unpriced GKE fixed item, lower_bound).
UNKNOWN: Final = "unknown"


@dataclass(frozen=True)
class Cost:
    """One cost in the four figures every output shows; None where the rate (or, for the
    per-million figures, the throughput) is not known."""

    usd_per_hour: float | None
    #: confirmed, estimate (a rate counted at a named source's quote), lower_bound (a sum that
    #: leaves out an unpriced item) or unknown (no figure: every figure None).
    status: str
    usd_per_month: float | None
    usd_per_million_requests: float | None
    usd_per_million_output_tokens: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "usd_per_hour": self.usd_per_hour,
            "usd_per_month": self.usd_per_month,
            "usd_per_million_requests": self.usd_per_million_requests,
            "usd_per_million_output_tokens": self.usd_per_million_output_tokens,
            "price_status": self.status,
        }


def per_million(usd_per_hour: float | None, per_s: float | None) -> float | None:
    """USD per million of something served at ``per_s`` a second (requests, output tokens);
    None without a rate or a positive, finite throughput."""
    if usd_per_hour is None or per_s is None or not (per_s > 0 and math.isfinite(per_s)):
        return None
    return cost_per_million_requests(usd_per_hour, per_s)


def cost(
    usd_per_hour: float | None,
    status: str,
    requests_per_s: float | None,
    output_tokens_per_s: float | None,
) -> Cost:
    """The four figures of ``usd_per_hour`` (None: unknown, whatever ``status`` says)."""
    if usd_per_hour is None:
        return Cost(None, UNKNOWN, None, None, None)
    return Cost(
        usd_per_hour,
        status,
        usd_per_hour * HOURS_PER_MONTH,
        per_million(usd_per_hour, requests_per_s),
        per_million(usd_per_hour, output_tokens_per_s),
    )


def money(value: float | None, status: str, unit: str = "") -> str:
    """A figure as tables print it: "~$1,234.56/h" (an estimate), ">=$0.26" (a lower bound),
    "$0.26", or "unknown" (no figure, or an unknown price), ``unit`` appended to a figure."""
    if value is None or status == UNKNOWN:
        return UNKNOWN
    return f"{status_prefix(status, '>=')}${value:,.2f}{unit}"


def instance_price(settings: Settings) -> tuple[float | None, str]:
    """One instance's hourly price and status (a Cloud Run instance, a TPU node, on GKE one
    replica's node): (None, "unknown") when one of its rates has no figure anywhere."""
    price = settings.price
    if price.is_lower_bound:
        return None, UNKNOWN
    return price.usd_per_hour, price.status
