"""The FastAPI app: a store and the settings, with the routes, the error handlers and CORS put together."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.telemetry import TelemetryConfig
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from ..stores import ChatHistoryStore, open_store
from .direct_routes import DirectRoute
from .guard import RequestGuard
from .health import add_health_routes
from .openapi import complete_openapi
from .problems import add_error_handlers
from .retention import sweeping
from .routes import add_routes
from .settings import ServiceSettings
from .shortcut import ConversationShortcut
from .ui import add_viewer

#: FastAPI's native OpenTelemetry, off: asking OpenTelemetry on every request whether a provider is
#: configured cost a fifth of a read's CPU, for traces the service never promised (it has ``/metrics``).
TELEMETRY_OFF: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}
#: FastAPI's per-request layers that do nothing here: telemetry is off, no route has a ``max_body_size``, and
#: the routes that need an ``AsyncExitStack`` get it themselves (:class:`.direct_routes.DirectRoute`).
IDLE_LAYERS = frozenset({"ExceptionTelemetryMiddleware", "AppBodyLimitMiddleware", "AsyncExitStackMiddleware"})


class ServiceApp(FastAPI):
    """FastAPI without the middleware layers the service never uses.

    Every layer a request passes through costs it a coroutine and a frame or two; these three were a
    sixth of a read's CPU in the app. A layer of another name, or of a later FastAPI, stays; so does the
    ``AsyncExitStack`` when a route of another class was added (say from a router of the caller's, by
    ``include_router``): FastAPI's own handler needs it. A conversation's request goes past the layers
    altogether when the shortcut knows them all (:mod:`.shortcut`).
    """

    #: the way past the layers for a conversation's requests (:mod:`.shortcut`), made with the layers
    shortcut: ConversationShortcut | None = None

    def build_middleware_stack(self) -> ASGIApp:
        idle = IDLE_LAYERS
        if any(_needs_exit_stack(route) for route in self.routes):
            idle = IDLE_LAYERS - {"AsyncExitStackMiddleware"}
        outer = stack = super().build_middleware_stack()  # FastAPI's own, then pruned
        while hasattr(stack, "app"):
            inner: Any = stack.app
            if type(inner).__name__ in idle:
                stack.app = inner.app
            else:
                stack = inner
        self.shortcut = ConversationShortcut.of(self.routes, self.user_middleware, self.exception_handlers)
        return outer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        shortcut = self.shortcut
        if shortcut is not None and scope["type"] == "http":
            handler = shortcut.handler(scope)
            if handler is not None:
                scope["app"] = self
                return await shortcut.serve(handler, scope, receive, send)
        await super().__call__(scope, receive, send)


def _needs_exit_stack(route: Any) -> bool:
    """Whether FastAPI may serve ``route`` with its own handler (an ``APIRoute`` or another route of FastAPI's, such
    as an included router), which needs the ``AsyncExitStack`` its middleware gives; a direct route has its own."""
    if isinstance(route, DirectRoute):
        return False
    return isinstance(route, APIRoute) or type(route).__module__.startswith("fastapi")


def create_app(store: ChatHistoryStore | str | None = None, settings: ServiceSettings | None = None) -> FastAPI:
    """Build the service around a store (an instance, or a URL for :func:`chatlab.stores.open_store`).

    A store given by URL (or the default in-memory one) belongs to the app, is opened with the
    settings' ``store_timeout`` and is closed when the app shuts down; a store instance stays the
    caller's, with its own timeout. ``settings.retention`` is given to the store, which the app
    then sweeps while it runs.
    """
    settings = settings or ServiceSettings()
    owned = not isinstance(store, ChatHistoryStore)
    the_store = store if isinstance(store, ChatHistoryStore) else open_store(store, timeout=settings.store_timeout)
    if settings.retention is not None:
        the_store.retention = float(settings.retention)
    app = ServiceApp(
        title="Chat history service",
        description="Keeps a list of chat messages (Microsoft.Extensions.AI `ChatMessage` JSON) per conversation key.",
        version="1.0",
        lifespan=_lifespan(the_store, owned),
        redirect_slashes=False,  # a redirect would send the client to whatever Host it gave; /chat-history/ is a 400
        telemetry=TELEMETRY_OFF,
    )
    app.router.route_class = DirectRoute  # the routes marked with direct() read their own arguments
    add_error_handlers(app)
    add_health_routes(app, the_store)
    served = _metered(app, the_store) if settings.metrics else the_store
    add_routes(app, served, settings)
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


def _metered(app: FastAPI, store: ChatHistoryStore) -> ChatHistoryStore:
    """Serve ``/metrics`` and count requests; the store the routes use, timed."""
    from ..stores import InMemoryChatHistoryStore
    from .metrics import MeteredStore, Metrics, add_metrics

    metrics = Metrics()
    if isinstance(store, InMemoryChatHistoryStore):
        metrics.count_stored(store)
    add_metrics(app, metrics)
    return MeteredStore(store, metrics)


def _allow_cross_origin(app: FastAPI, origins: tuple[str, ...]) -> None:
    """Let pages of these origins call the service, and read the headers its answers carry."""
    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
        allow_methods=["GET", "HEAD", "POST", "PUT", "DELETE"],
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
