"""The service for a notebook or a script: started in a background thread here, or one running elsewhere."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..runner import BackgroundServer
from ..stores import ChatHistoryStore
from ..vocabulary import SERVICE_URL_VARIABLE
from .app import create_app
from .routes import SERVICE_NAME
from .settings import ServiceSettings


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
    a notebook cell can be re-run. ``tls_cert``/``tls_key`` (PEM files) serve HTTPS; without them,
    the settings' (``CHATLAB_TLS_CERT``/``CHATLAB_TLS_KEY``) do. The settings' ``access_log``
    logs a line per request to the ``uvicorn.access`` logger (off by default).
    """
    settings = settings or ServiceSettings()
    if tls_cert is None and tls_key is None:
        tls_cert, tls_key = settings.tls_cert, settings.tls_key
    return BackgroundServer.ensure(
        lambda: create_app(store, settings),
        name=SERVICE_NAME,
        host=host,
        port=port,
        log_level=log_level,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        access_log=settings.access_log,
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
    url = os.environ.get(SERVICE_URL_VARIABLE)
    if url:
        print(f"Chat history service: {url} (from {SERVICE_URL_VARIABLE})")
        return ExternalService(url.rstrip("/"))
    server = start_service(port=port, store=store)
    print(f"Chat history service: {server.url} (started in a background thread of this process)")
    return server
