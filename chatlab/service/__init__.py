"""The chat history service: the article's ASP.NET Minimal API as a FastAPI app.

The article's plain requests work unchanged; what it leaves out are options of :class:`ServiceSettings`, all off by
default. One module per idea: :func:`create_app` (:mod:`.app`) puts them together; the endpoints' table is in
:mod:`.routes`; :mod:`.heads` bounds every request's head; :mod:`.server_options` gives uvicorn the connection
bounds; :mod:`.background` starts the service for notebooks and scripts."""

from .app import create_app
from .background import ExternalService, ensure_service, start_service
from .routes import SERVICE_NAME
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
