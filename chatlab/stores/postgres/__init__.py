"""The PostgreSQL store (asyncpg): :mod:`.store`, :mod:`.batches` (calls share statements), :mod:`.appends` (the
append rules), :mod:`.statements` (the other SQL), :mod:`.schema` (its upgrades), :mod:`.connections` (deadlines)."""

from __future__ import annotations

from .._urls import split_url
from .connections import CHATLAB_PARAMETERS
from .statements import SCHEMA_VERSION
from .store import PostgresChatHistoryStore

__all__ = ["CHATLAB_PARAMETERS", "SCHEMA_VERSION", "PostgresChatHistoryStore", "split_url"]
