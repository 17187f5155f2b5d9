"""Where the chat history service keeps messages: one interface, several stores.

``open_store(url)`` picks one by URL: ``memory://`` (the default, as in the article).
"""

from __future__ import annotations

from .base import ChatHistoryStore, ConversationSummary, EncodedMessage, StoreError
from .memory import InMemoryChatHistoryStore

__all__ = [
    "ChatHistoryStore",
    "ConversationSummary",
    "EncodedMessage",
    "InMemoryChatHistoryStore",
    "StoreError",
    "open_store",
]

SUPPORTED = "memory://"


def open_store(url: str | None = None) -> ChatHistoryStore:
    """Create the store a URL names; ``None`` or ``"memory://"`` is the in-memory store."""
    if url in (None, "", "memory", "memory://"):
        return InMemoryChatHistoryStore()
    raise ValueError(f"unsupported store URL {url!r}: use one of {SUPPORTED}")
