"""Chat history in Redis (``pip install 'chatlab[redis]'``: redis-py with hiredis), on one server or a cluster.

* :mod:`~chatlab.stores.redis.store`: :class:`RedisChatHistoryStore`, the store interface;
* :mod:`~chatlab.stores.redis.keys`: the key layout (a conversation's keys in one hash slot);
* :mod:`~chatlab.stores.redis.scripts`: the Lua scripts, one per operation (the append rules among them);
* :mod:`~chatlab.stores.redis.connections`: redis-py's clients and the pipelining of concurrent calls;
* :mod:`~chatlab.stores.redis.upgrade`: older layouts upgraded in place.
"""

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
