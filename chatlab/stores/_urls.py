"""Store URLs carry a few query parameters chatlab reads itself; the drivers must not see them."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def split_url(url: str, ours: Collection[str]) -> tuple[str, dict[str, str]]:
    """The URL without the query parameters named in ``ours``, and those parameters."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(name, value) for name, value in query if name not in ours]
    return urlunsplit(parts._replace(query=urlencode(kept))), {name: value for name, value in query if name in ours}


def path_from_url(url: str) -> Path:
    """The file a ``sqlite:`` URL (as in SQLAlchemy) or a bare path names; a query string or a host is refused."""
    if url.startswith("sqlite:"):
        rest = url[len("sqlite:") :]
        if not rest.startswith("///") or len(rest) == 3:
            raise ValueError(
                f"invalid SQLite store URL {url!r}: use sqlite:///relative/path.db or sqlite:////absolute/path.db"
            )
        rest = rest[3:]
        if "?" in rest or "#" in rest:
            raise ValueError(f"invalid SQLite store URL {url!r}: query strings are not supported")
    else:
        rest = url
    if rest in (":memory:", "") or rest.startswith("file:"):
        raise ValueError(f"invalid SQLite store {url!r}: give a file path (for memory, use memory://)")
    return Path(rest).expanduser()
