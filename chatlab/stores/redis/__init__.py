"""Chat history in Redis (``pip install 'chatlab[redis]'``: redis-py with hiredis), on one server or a cluster:
the store, its key layout (``keys``), Lua scripts, clients (``connections``) and the upgrade of older layouts."""

from __future__ import annotations

from .._urls import split_url
from .scripts import UNVERSIONED
from .store import CHATLAB_PARAMETERS, CLUSTER_BUCKETS, DEFAULT_PREFIX, SCHEMA_VERSION, RedisChatHistoryStore

__all__ = [
    "CHATLAB_PARAMETERS",
    "CLUSTER_BUCKETS",
    "DEFAULT_PREFIX",
    "SCHEMA_VERSION",
    "UNVERSIONED",
    "RedisChatHistoryStore",
    "split_url",
]
