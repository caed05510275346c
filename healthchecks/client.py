"""Compatibility: the HTTP client factory lives in :mod:`endpoint.client`."""

from endpoint.client import make_client

__all__ = ["make_client"]
