"""The chat history service: the article's ASP.NET Minimal API as a FastAPI app.

The endpoints and the conversation versions are described in :mod:`.routes`. Bodies are read
raw and parsed once (:mod:`.bodies`); every error is a problem JSON (:mod:`.problems`).

The article's plain requests work unchanged; what it leaves out are options of
:class:`ServiceSettings` (:mod:`.settings`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from ..runner import BackgroundServer
from ..stores import ChatHistoryStore, open_store
from .openapi import complete_openapi
from .problems import add_error_handlers
from .routes import SERVICE_NAME, add_routes
from .settings import KEY_MAX_LENGTH, KEY_PATTERN, ServiceSettings

__all__ = [
    "KEY_MAX_LENGTH",
    "KEY_PATTERN",
    "SERVICE_NAME",
    "ExternalService",
    "ServiceSettings",
    "create_app",
    "ensure_service",
    "start_service",
]




def create_app(store: ChatHistoryStore | str | None = None, settings: ServiceSettings | None = None) -> FastAPI:
    """Build the service around a store (an instance, or a URL for :func:`chatlab.stores.open_store`).

    A store given by URL (or the default in-memory one) belongs to the app and is closed
    when the app shuts down; a store instance stays the caller's.
    """
    owned = not isinstance(store, ChatHistoryStore)
    the_store = open_store(store) if owned else store  # type: ignore[arg-type]
    limits = settings or ServiceSettings()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if owned:
            await the_store.close()

    app = FastAPI(
        title="Chat history service",
        description="Keeps a list of chat messages (Microsoft.Extensions.AI `ChatMessage` JSON) per conversation key.",
        version="1.0",
        lifespan=lifespan,
    )
    app.state.store = the_store
    app.state.settings = limits
    add_error_handlers(app)
    add_routes(app, the_store, limits)
    complete_openapi(app, limits)
    if limits.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=limits.cors_origins,
            allow_methods=["GET", "HEAD", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "If-Match", "Idempotency-Key"],
            expose_headers=[
                "ETag", "Location", "Retry-After", "Idempotent-Replayed", "WWW-Authenticate", "X-Message-Count", "Link"
            ],
            allow_credentials=False,
        )
    return app


def start_service(
    host: str = "127.0.0.1",
    port: int = 0,
    store: ChatHistoryStore | str | None = None,
    settings: ServiceSettings | None = None,
    log_level: str = "warning",
    *,
    tls_cert: str | os.PathLike[str] | None = None,
    tls_key: str | os.PathLike[str] | None = None,
) -> BackgroundServer:
    """Start the service in a background thread (as the article's separately started server).

    Returns the running :class:`~chatlab.runner.BackgroundServer` (``.url``, ``.stop()``).
    Calling it again with the same host and port returns the server already running, so
    a notebook cell can be re-run. ``tls_cert``/``tls_key`` (PEM files) serve HTTPS.
    """
    return BackgroundServer.ensure(
        lambda: create_app(store, settings),
        name=SERVICE_NAME,
        host=host,
        port=port,
        log_level=log_level,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
    )


@dataclass(frozen=True)
class ExternalService:
    """A chat history service started elsewhere (``CHAT_HISTORY_SERVICE_URL``); stopping it is not ours to do."""

    url: str

    def stop(self) -> None:
        """Nothing to stop: the service belongs to whoever started it."""

    def __repr__(self) -> str:
        return f"<ExternalService {self.url}>"


def ensure_service(port: int = 0, store: ChatHistoryStore | str | None = None) -> BackgroundServer | ExternalService:
    """The service the notebooks use: the one ``CHAT_HISTORY_SERVICE_URL`` names, else one started here.

    Prints which, so a reader always knows where the history goes.
    """
    url = os.environ.get("CHAT_HISTORY_SERVICE_URL")
    if url:
        print(f"Chat history service: {url} (from CHAT_HISTORY_SERVICE_URL)")
        return ExternalService(url.rstrip("/"))
    server = start_service(port=port, store=store)
    print(f"Chat history service: {server.url} (started in a background thread of this process)")
    return server
