"""The SQLite store: chat history in one embedded file (standard library ``sqlite3``), see :mod:`.store`."""

from __future__ import annotations

from .._urls import path_from_url
from .store import SqliteChatHistoryStore

__all__ = ["SqliteChatHistoryStore", "path_from_url"]
