"""The FastAPI app: a store and the settings, with the routes, the error handlers and CORS put together."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig
from starlette.middleware.cors import CORSMiddleware

from ..stores import ChatHistoryStore, open_store
from .guard import RequestGuard
from .health import add_health_routes
from .openapi import complete_openapi
from .problems import add_error_handlers
from .request_route import RequestRoute
from .retention import sweeping
from .routes import add_routes
from .settings import ServiceSettings
from .ui import add_viewer

#: FastAPI's native OpenTelemetry (its documented ``telemetry`` option), off: the service promises no traces and
#: has ``/metrics``; asking OpenTelemetry on every request whether a provider is configured is work for nothing.
TELEMETRY_OFF: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}


def create_app(store: ChatHistoryStore | str | None = None, settings: ServiceSettings | None = None) -> FastAPI:
    """Build the service around a store (an instance, or a URL for :func:`chatlab.stores.open_store`).

    A store opened from a URL (or the default in-memory one) belongs to the app: opened with ``store_timeout``, closed
    at shutdown. An instance stays the caller's. With ``settings.retention`` the app sweeps the store while it runs.
    """
    settings = settings or ServiceSettings()
    owned = not isinstance(store, ChatHistoryStore)
    the_store = store if isinstance(store, ChatHistoryStore) else open_store(store, timeout=settings.store_timeout)
    if settings.retention is not None:
        the_store.retention = float(settings.retention)
    app = FastAPI(
        title="Chat history service",
        description="Keeps a list of chat messages (Microsoft.Extensions.AI `ChatMessage` JSON) per conversation key.",
        version="1.0",
        lifespan=_lifespan(the_store, owned),
        redirect_slashes=False,  # a redirect would send the client to whatever Host it gave; /chat-history/ is a 400
        telemetry=TELEMETRY_OFF,
        # Swagger UI and ReDoc load their scripts from a CDN, on the service's origin: off unless asked
        docs_url="/docs" if settings.api_docs else None,
        redoc_url="/redoc" if settings.api_docs else None,
    )
    # a conversation's endpoints take only the request: called with it, with nothing for FastAPI to solve
    app.router.route_class = RequestRoute
    add_error_handlers(app)
    served = _metered(app, the_store, settings) if settings.metrics else the_store
    add_routes(app, served, settings)
    add_health_routes(app, the_store)
    if settings.viewer:
        add_viewer(app)
    complete_openapi(app, settings)
    if settings.cors_origins:
        _allow_cross_origin(app, settings.cors_origins)
    app.add_middleware(RequestGuard, allowed_hosts=settings.allowed_hosts)  # the outermost: before CORS too
    return app


def _lifespan(store: ChatHistoryStore, owned: bool) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Sweep the store while the app runs (with a retention); close it when the app shuts down, if the app opened it."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with sweeping(store):
            yield
        if owned:
            await store.close()

    return lifespan


def _metered(app: FastAPI, store: ChatHistoryStore, settings: ServiceSettings) -> ChatHistoryStore:
    """Serve ``/metrics`` (with API keys, to a key's holder) and count requests; the store the routes use, timed."""
    from ..stores import InMemoryChatHistoryStore
    from .metrics import MeteredStore, Metrics, add_metrics

    metrics = Metrics()
    if isinstance(store, InMemoryChatHistoryStore):
        metrics.count_stored(store)
    add_metrics(app, metrics, settings.api_keys)
    return MeteredStore(store, metrics)


def _allow_cross_origin(app: FastAPI, origins: tuple[str, ...]) -> None:
    """Let pages of these origins call the service, and read the headers its answers carry."""
    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
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
