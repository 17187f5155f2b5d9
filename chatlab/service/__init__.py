"""The chat history service: the article's ASP.NET Minimal API as a FastAPI app.

The article's plain requests work unchanged; what it leaves out are options of :class:`ServiceSettings`, all off by
default. One module per idea:

* :mod:`.settings`: :class:`ServiceSettings`, what the service allows; :mod:`.app`: :func:`create_app` around a store;
* :mod:`.routes`: the endpoints (their table is there); :mod:`.callers`: API keys, namespaces, the rate limit;
* :mod:`.parameters` and :mod:`.bodies`: what a request carries, checked;
* :mod:`.problems`: every error as problem JSON; :mod:`.responses`: JSON written by hand;
* :mod:`.openapi`: the OpenAPI description completed where FastAPI cannot know;
* :mod:`.heads`: the first checks of every request (its ``Host``, its head); :mod:`.server_protocol`: what uvicorn
  does not bound itself (a request head's time and size, fair slots);
* :mod:`.background`: :func:`start_service` and :func:`ensure_service`, for notebooks and scripts.
"""

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
