"""Which source ranges open a port to the internet: one rule for settings and policies alike.

A list of CIDR ranges is refused when, after merging (so that splitting a range into pieces
changes nothing), one merged range holds public addresses and is wider than the allowed prefix
(`/16` for IPv4, `/48` for IPv6 by default), or when the ranges together cover the whole
public internet (`0.0.0.0/1` + `128.0.0.0/1`; `2000::/3`, all of IPv6's global unicast space),
whatever the prefix setting. Private, loopback, link-local and carrier-grade NAT ranges are not
public. Pure: standard library `ipaddress` only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Address space that is not reachable from the internet.
NON_PUBLIC: tuple[Network, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
    )
)
#: The public internet, per family: every IPv4 address outside NON_PUBLIC; IPv6 global unicast.
INTERNET_V4 = ipaddress.IPv4Network("0.0.0.0/0")
INTERNET_V6 = ipaddress.IPv6Network("2000::/3")

_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")

DEFAULT_MIN_PREFIX_V4 = 16
DEFAULT_MIN_PREFIX_V6 = 48


class RangeError(ValueError):
    """A source range that is not a CIDR range."""


def parse_ranges(ranges: Iterable[str]) -> list[Network]:
    out: list[Network] = []
    for cidr in ranges:
        try:
            network = ipaddress.ip_network(str(cidr).strip(), strict=False)
            if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_MAPPED):
                # An IPv4-mapped IPv6 range (::ffff:0:0/96) is judged as the IPv4 range it maps.
                network = ipaddress.IPv4Network(
                    (int(network.network_address) & 0xFFFFFFFF, max(network.prefixlen - 96, 0))
                )
            out.append(network)
        except ValueError:
            raise RangeError(
                f"{cidr!r} is not a CIDR range (for example 203.0.113.0/24 or 2001:db8::/48)"
            ) from None
    return out


def is_public(network: Network) -> bool:
    """The range holds at least one internet address."""
    return not any(
        network.version == private.version and network.subnet_of(private)  # type: ignore[arg-type]
        for private in NON_PUBLIC
    )


def covers_internet(networks: Sequence[Network]) -> list[str]:
    """Families ("IPv4", "IPv6") whose whole public space the ranges cover together: merged
    with the non-public space, they hold the family's whole internet."""
    found: list[str] = []
    for family, internet in (("IPv4", INTERNET_V4), ("IPv6", INTERNET_V6)):
        same = [n for n in (*networks, *NON_PUBLIC) if n.version == internet.version]
        merged = ipaddress.collapse_addresses(same)  # type: ignore[type-var]
        if any(internet.subnet_of(n) for n in merged):  # type: ignore[arg-type]
            found.append(family)
    return found


def merge(networks: Sequence[Network]) -> list[Network]:
    v4 = [n for n in networks if isinstance(n, ipaddress.IPv4Network)]
    v6 = [n for n in networks if isinstance(n, ipaddress.IPv6Network)]
    return [*ipaddress.collapse_addresses(v4), *ipaddress.collapse_addresses(v6)]


def source_range_problems(
    ranges: Iterable[str],
    *,
    min_prefix_v4: int = DEFAULT_MIN_PREFIX_V4,
    min_prefix_v6: int = DEFAULT_MIN_PREFIX_V6,
) -> list[str]:
    """Why these ranges open a port too widely (empty when they do not). Raises RangeError."""
    networks = parse_ranges(ranges)
    problems: list[str] = []
    covered = covers_internet(networks)
    for family in covered:
        given = [str(n) for n in networks if f"IPv{n.version}" == family]
        verb = "covers" if len(given) == 1 else "together cover"
        problems.append(f"{', '.join(given)} {verb} the whole {family} internet")
    for network in merge(networks):
        limit = min_prefix_v4 if network.version == 4 else min_prefix_v6
        if f"IPv{network.version}" in covered:
            continue  # already said
        if network.prefixlen < limit and is_public(network):
            problems.append(
                f"{network} is a public range wider than /{limit} (merged from the ranges given)"
            )
    return problems
