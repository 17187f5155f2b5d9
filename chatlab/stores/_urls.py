"""Store URLs: the query parameters chatlab reads itself (the drivers must not see them), the file a SQLite URL names,
and how a URL is shown without its credentials (in messages, logs and ``GET /``)."""

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


def redacted(url: str, *, default_port: int, default_database: str) -> str:
    """Where a database URL points, without user or password: ``host:port/database``, ``cluster host:port`` for a
    ``+cluster`` scheme, or ``unix:`` and a socket's path."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix:{parts.path}"
    where = f"{parts.hostname or 'localhost'}:{parts.port or default_port}"
    if parts.scheme.endswith("+cluster"):
        return f"cluster {where}"
    return f"{where}/{parts.path.lstrip('/') or default_database}"


def describe_url(url: str | None) -> str:
    """A store URL as the operator gave it, its password masked, for logs."""
    if not url or "://" not in url:
        return url or "memory://"
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)))
