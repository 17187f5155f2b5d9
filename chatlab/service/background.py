"""The service for a notebook or a script: started in a background thread here, or one running elsewhere."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from ..runner import BackgroundServer
from ..stores import ChatHistoryStore
from ..vocabulary import SERVICE_URL_VARIABLE
from .app import create_app
from .routes import SERVICE_NAME
from .server_options import server_options
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
    """Start the service in a background thread (the article's separately started server); ``.url``, ``.stop()``. The
    same arguments again return the server already running, so a notebook cell can be re-run; ``tls_cert``/``tls_key``
    (PEM) serve HTTPS, else the settings'."""
    settings = settings or ServiceSettings()
    if tls_cert is None and tls_key is None:
        tls_cert, tls_key = settings.tls_cert, settings.tls_key
    if host not in settings.allowed_hosts:
        settings = settings.model_copy(update={"allowed_hosts": (*settings.allowed_hosts, host)})
    return BackgroundServer.ensure(
        functools.partial(create_app, store, settings),
        name=SERVICE_NAME,
        host=host,
        port=port,
        identity=("memory://" if store is None else store, settings),
        log_level=log_level,
        ssl_certfile=None if tls_cert is None else os.fspath(tls_cert),
        ssl_keyfile=None if tls_key is None else os.fspath(tls_key),
        access_log=settings.access_log,
        server_options=server_options(settings),
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
    """The service the notebooks use: the one ``CHAT_HISTORY_SERVICE_URL`` names, else one started here (it says
    which, so a reader always knows where the history goes)."""
    url = os.environ.get(SERVICE_URL_VARIABLE)
    if url:
        print(f"Chat history service: {url} (from {SERVICE_URL_VARIABLE})")
        return ExternalService(url.rstrip("/"))
    server = start_service(port=port, store=store)
    print(f"Chat history service: {server.url} (started in a background thread of this process)")
    return server
