"""What the endpoints share, made once per app from its store and settings and kept in ``app.state`` (Starlette's
documented place for it), so that the endpoints are plain module-level functions of the request."""

from __future__ import annotations

from fastapi import FastAPI, Request

from ..stores import ChatHistoryStore
from .bodies import BodyReader
from .callers import caller_functions
from .keys import KeyRule
from .security.auth import Caller
from .settings import ServiceSettings


class ServiceContext:
    """The store, the settings, the one key rule, the body reader and who calls."""

    def __init__(self, store: ChatHistoryStore, settings: ServiceSettings) -> None:
        self.store = store
        self.settings = settings
        self.keys = KeyRule(settings)
        self.bodies = BodyReader(settings)
        self.caller_dependency, self.caller = caller_functions(settings)
        #: How long an ``Idempotency-Key``'s record is kept, so that a retry is answered as the first time.
        self.idempotency_ttl = settings.idempotency_ttl

    async def conversation(self, request: Request) -> tuple[Caller, str]:
        """Who calls, then which conversation (so no valid API key is a 401 whatever the key)."""
        caller = await self.caller(request)
        return caller, self.keys.check(request.path_params["conversationKey"])

    def install(self, app: FastAPI) -> None:
        """Keep this context in ``app.state``, where :func:`context_of` finds it."""
        app.state.service = self


def context_of(request: Request) -> ServiceContext:
    """The context of the app serving ``request``."""
    context: ServiceContext = request.app.state.service
    return context
