"""``GET /healthz`` and ``GET /readyz`` (docs/operations.md): open, outside the rate limit and the OpenAPI document."""

from __future__ import annotations

import asyncio
import logging

from fastapi import FastAPI, Response

from ..stores import ChatHistoryStore, StoreError
from ..vocabulary import Refused
from .responses import json_response

log = logging.getLogger(__name__)

READY_TIMEOUT = 2.0  # seconds /readyz waits for the store's ping


def add_health_routes(app: FastAPI, store: ChatHistoryStore) -> None:
    """``/healthz`` (the process answers) and ``/readyz`` (the store answers too), outside the API's description."""

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> Response:
        """Alive: the process answers."""
        return json_response({"status": "ok"})

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> Response:
        """Ready: the store answers a ping within :data:`READY_TIMEOUT`; else 503."""
        try:
            await asyncio.wait_for(store.ping(), READY_TIMEOUT)
        except TimeoutError:
            raise _not_ready(f"the history store did not answer within {READY_TIMEOUT:g} s") from None
        except StoreError as exc:  # its message may name hosts, ports and databases: for the log, not the answer
            log.warning("/readyz: the store is unavailable: %s", exc)
            raise _not_ready("store unavailable") from None
        return json_response({"status": "ready"})


def _not_ready(why: str) -> Refused:
    return Refused(503, f"not ready: {why}; retry later", headers={"Retry-After": "1"})
