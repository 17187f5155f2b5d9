"""The PostgreSQL store: chat history shared by any number of service processes (``pip install 'chatlab[postgres]'``).

Split by idea: :mod:`.store` is the :class:`~chatlab.stores.base.ChatHistoryStore` implementation, :mod:`.batches`
groups concurrent reads and appends into shared statements, :mod:`.appends` holds the append rules (one server-side
function), :mod:`.statements` the rest of the SQL, :mod:`.schema` the creation and in-place upgrade of the tables,
:mod:`.connections` the pools and each operation's deadline. It talks to PostgreSQL through asyncpg's public API.
"""

from __future__ import annotations

from .._urls import split_url
from .connections import CHATLAB_PARAMETERS
from .statements import SCHEMA_VERSION
from .store import PostgresChatHistoryStore

__all__ = ["CHATLAB_PARAMETERS", "SCHEMA_VERSION", "PostgresChatHistoryStore", "split_url"]
