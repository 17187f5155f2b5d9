"""The PostgreSQL store (asyncpg): chat history shared by any number of service processes.

:mod:`.store` is the store, :mod:`.batches` groups concurrent calls into shared statements, :mod:`.appends` holds the
append rules, :mod:`.statements` the rest of the SQL, :mod:`.schema` the tables' creation and upgrades,
:mod:`.connections` the pools and each operation's deadline.
"""

from __future__ import annotations

from .._urls import split_url
from .connections import CHATLAB_PARAMETERS
from .statements import SCHEMA_VERSION
from .store import PostgresChatHistoryStore

__all__ = ["CHATLAB_PARAMETERS", "SCHEMA_VERSION", "PostgresChatHistoryStore", "split_url"]
