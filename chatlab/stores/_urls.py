"""Store URLs carry a few query parameters chatlab reads itself; the drivers must not see them."""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def split_url(url: str, ours: Collection[str]) -> tuple[str, dict[str, str]]:
    """The URL without the query parameters named in ``ours``, and those parameters."""
    parts = urlsplit(url)
    taken: dict[str, str] = {}
    kept: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in ours:
            taken[name] = value
        else:
            kept.append((name, value))
    return urlunsplit(parts._replace(query=urlencode(kept))), taken
