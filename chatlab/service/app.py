"""The FastAPI app: a store and the settings, with the routes, the error handlers and CORS put together. With a
retention, the app sweeps the store every tenth of it (at most every minute, at least every 50 ms)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from ..stores import ChatHistoryStore, StoreError, open_store
from .heads import RequestGuard
from .health import add_health_routes
from .metrics import add_metrics
from .openapi import complete_openapi
from .problems import ERROR_HANDLERS
from .request_route import RequestRoute
from .routes import add_routes
from .settings import ServiceSettings
from .tracing import add_tracing
from .ui import add_viewer

log = logging.getLogger(__name__)


def create_app(store: ChatHistoryStore | str | None = None, settings: ServiceSettings | None = None) -> FastAPI:
    """Build the service around a store (an instance, or a URL for :func:`chatlab.stores.open_store`). A store opened
    from a URL (or the default in-memory one) belongs to the app: opened with ``store_timeout``, closed at shutdown."""
    settings = settings or ServiceSettings()
    owned = not isinstance(store, ChatHistoryStore)
    the_store = store if isinstance(store, ChatHistoryStore) else open_store(store, timeout=settings.store_timeout)
    if settings.retention is not None:
        the_store.retention = float(settings.retention)
    app = FastAPI(
        title="Chat history service",
        description="Keeps a list of chat messages (Microsoft.Extensions.AI `ChatMessage` JSON) per conversation key.",
        version="1.0",
        lifespan=functools.partial(_lifespan, the_store, owned),
        exception_handlers=ERROR_HANDLERS,
        redirect_slashes=False,  # a redirect would send the client to whatever Host it gave; /chat-history/ is a 400
        # FastAPI's OpenTelemetry, off: the service promises no traces and has /metrics, and asking OpenTelemetry on
        # every request whether a provider is configured is work for nothing
        telemetry={"tracing": False, "metrics": False, "logs": False},
        # Swagger UI and ReDoc load their scripts from a CDN, on the service's origin: off unless asked
        docs_url="/docs" if settings.api_docs else None,
        redoc_url="/redoc" if settings.api_docs else None,
    )
    # a conversation's endpoints take only the request: called with it, with nothing for FastAPI to solve
    app.router.route_class = RequestRoute
    served = add_metrics(app, the_store, settings.api_keys) if settings.metrics else the_store
    if settings.traces:
        served = add_tracing(app, served)
    add_routes(app, served, settings)
    add_health_routes(app, the_store)
    if settings.viewer:
        add_viewer(app)
    complete_openapi(app, settings)
    if settings.cors_origins:  # pages of these origins may call the service and read its answers' headers
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "If-Match", "Idempotency-Key"],
            expose_headers=[
                "ETag",
                "Location",
                "Retry-After",
                "Idempotent-Replayed",
                "WWW-Authenticate",
                "X-Message-Count",
                "Link",
            ],
            allow_credentials=False,
        )
    app.add_middleware(RequestGuard, allowed_hosts=settings.allowed_hosts)  # the outermost: before CORS too
    return app


@asynccontextmanager
async def _lifespan(store: ChatHistoryStore, owned: bool, _: FastAPI) -> AsyncIterator[None]:
    """Sweep the store while the app runs (with a retention); close it at shutdown if the app opened it."""
    sweeper = None if store.retention is None else asyncio.create_task(_sweep_forever(store, store.retention))
    try:
        yield
    finally:
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
    if owned:
        await store.close()


async def _sweep_forever(store: ChatHistoryStore, retention: float) -> None:
    while True:
        try:
            deleted = await store.sweep()
            if deleted:
                log.info("retention: deleted %d conversations not written for %s s", deleted, retention)
        except StoreError as exc:  # the store is down: try again next time
            log.warning("retention sweep failed: %s", exc)
        await asyncio.sleep(min(60.0, max(0.05, retention / 10)))
