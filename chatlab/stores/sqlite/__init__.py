"""The SQLite store: chat history in one embedded file (standard library ``sqlite3``), see :mod:`.store`."""

from __future__ import annotations

from .._urls import path_from_url
from .schema import SCHEMA_VERSION
from .store import SqliteChatHistoryStore

__all__ = ["SCHEMA_VERSION", "SqliteChatHistoryStore", "path_from_url"]
