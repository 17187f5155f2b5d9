"""Where the chat history service keeps messages: one interface, several stores, picked by URL.

* ``memory://`` (or nothing): in this process's memory, as in the article (the default);
* ``sqlite:///history.db`` (relative), ``sqlite:////var/lib/chatlab/history.db`` (absolute) or a bare file path;
* ``postgresql://user@host:5432/db`` (``?schema=NAME``): needs ``chatlab[postgres]``;
* ``redis://host:6379/0`` (``rediss://``, ``unix://``; ``?prefix=NAME:``) or ``redis+cluster://host:7000``:
  needs ``chatlab[redis]``. A driver is imported only when its store is opened."""

from __future__ import annotations

from typing import Any

# the package's interface, re-exported explicitly
from ._urls import describe_url as describe_url
from .base import ChatHistoryStore as ChatHistoryStore
from .base import ConversationSlice as ConversationSlice
from .base import ConversationSummary as ConversationSummary
from .base import EncodedMessage as EncodedMessage
from .base import StoreError as StoreError
from .memory import InMemoryChatHistoryStore as InMemoryChatHistoryStore


def open_store(url: str | None = None, *, timeout: float | None = None, **options: Any) -> ChatHistoryStore:
    """Create the store a URL names (``None``: in memory), connected on first use. ``timeout`` bounds each operation
    of a store that waits (seconds, docs/stores.md); ``options`` go to the store's constructor."""
    url = (url or "").strip()
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if url in ("", "memory", "memory://"):
        return InMemoryChatHistoryStore(**options)  # it never waits: no timeout
    if scheme == "memory":
        raise ValueError(f"unsupported store URL {url!r}: the in-memory store is just memory://")
    waits: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresChatHistoryStore

        return PostgresChatHistoryStore(url, **waits, **options)
    if scheme in ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster"):
        from .redis import RedisChatHistoryStore

        return RedisChatHistoryStore(url, **waits, **options)
    is_sqlite = url.lower().startswith("sqlite:")
    if not is_sqlite and (scheme or (":" in url.split("/", 1)[0] and not _looks_like_windows_path(url))):
        raise ValueError(
            f"unsupported store URL {url!r}: use one of memory://, sqlite:///path/to/history.db (or a file path), "
            "postgresql://..., redis://..., redis+cluster://..."
        )
    from ._urls import path_from_url
    from .sqlite import SqliteChatHistoryStore

    waits = {} if timeout is None else {"busy_timeout": timeout}
    return SqliteChatHistoryStore(path_from_url(url), **waits, **options)


def _looks_like_windows_path(url: str) -> bool:
    return len(url) >= 3 and url[0].isalpha() and url[1] == ":" and url[2] in "\\/"
