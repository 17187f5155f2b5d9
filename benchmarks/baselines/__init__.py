"""What a user would write instead of chatlab: one small FastAPI app per store, written the obvious way.

Each app serves the service's two hot paths with public APIs only, as a tutorial would show them:
a pydantic body model, one statement or command per request, the store's mainstream driver, and
the same durability as chatlab's store on the same backend. It has no idempotency keys, versions,
limits or problem answers: everything chatlab adds is extra work the baseline does not do.

* ``GET /chat-history/{key}``: the conversation's messages as a JSON array;
* ``POST /chat-history/{key}``: ``{"messages": [...]}`` appended, ``202``;
* ``PUT /chat-history/{key}``: the conversation replaced (how the benchmark fills the read's conversation);
* ``GET /``: answers, so a starter can tell the app is up.

:func:`baseline_app` picks the app by the store's name (``memory``, ``sqlite``, ``postgresql``, ``redis``).
"""

from __future__ import annotations

from fastapi import FastAPI

STORES = ("memory", "sqlite", "postgresql", "redis")


def baseline_app(store: str, url: str) -> FastAPI:
    """The baseline app for ``store``, keeping its data at ``url`` (``memory://`` for the in-memory one)."""
    if store == "memory":
        from .memory import create_app
    elif store == "sqlite":
        from .sqlite import create_app
    elif store == "postgresql":
        from .postgres import create_app
    elif store == "redis":
        from .redis import create_app
    else:
        raise ValueError(f"no baseline for the store {store!r}: choose from {', '.join(STORES)}")
    return create_app(url)
