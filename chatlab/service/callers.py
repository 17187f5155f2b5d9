"""Who is calling: the API key that decides the caller's namespace, and the caller's rate limit; a FastAPI dependency
where the OpenAPI document shows the key scheme, a plain function of the request elsewhere (:func:`caller_functions`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..vocabulary import Refused
from .security.auth import Caller
from .security.ratelimit import RateLimiter
from .settings import ServiceSettings

#: The caller of every request to an open service (the article's: one namespace) without a rate limit.
_ANYONE = Caller(None, "client")
_BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key of the service (`Authorization: Bearer <key>`); it decides the namespace "
    "of conversations the request sees.",
)


def caller_functions(settings: ServiceSettings) -> tuple[Any, Callable[[Request], Awaitable[Caller]]]:
    """The dependency that names the caller, and the same called as FastAPI would call it (one rate limit): with API
    keys, by a valid ``Authorization: Bearer <key>``, in that key's namespace (401 without one); else by its address,
    in the one namespace. 429 over the rate limit."""
    limit = _rate_limit(settings)
    keys = settings.api_keys
    if keys is not None:

        async def authenticated_caller(
            request: Request,
            credentials: HTTPAuthorizationCredentials | None = Depends(_BEARER),  # noqa: B008
        ) -> Caller:
            found = keys.namespace_of(credentials.credentials) if credentials is not None else None
            if found is None:
                limit(_client(request))  # slows down key guessing
                raise _no_valid_key(request)
            number, namespace = found
            identity = f"key:{number}"
            limit(identity)
            return Caller(namespace, identity)

        async def resolve_key(request: Request) -> Caller:
            return await authenticated_caller(request, await _BEARER(request))

        return authenticated_caller, resolve_key

    async def anyone(request: Request) -> Caller:
        return _ANYONE  # without a rate limit the identity counts for nothing: one caller does for every request

    async def open_caller(request: Request) -> Caller:
        identity = _client(request)
        limit(identity)
        return Caller(None, identity)

    dependency = anyone if limit is _unlimited else open_caller
    return dependency, dependency


def _rate_limit(settings: ServiceSettings) -> Callable[[str], None]:
    """Count a request against an identity; 429 with ``Retry-After`` once it is over the limit."""
    if not settings.rate_limit:
        return _unlimited
    limiter = RateLimiter(settings.rate_limit)

    def limit(identity: str) -> None:
        wait = limiter.take(identity)
        if wait:
            raise Refused(
                429,
                f"too many requests: the limit is {limiter.limit}; retry after the Retry-After seconds",
                headers={"Retry-After": str(max(1, math.ceil(wait)))},  # whole seconds, rounded up
            )

    return limit


def _unlimited(identity: str) -> None:
    """No rate limit."""


def _client(request: Request) -> str:
    """A caller without a key is known by its address."""
    return f"client:{request.client.host if request.client else '-'}"


def _no_valid_key(request: Request) -> Refused:
    """401 saying whether the key is missing or wrong, with the ``WWW-Authenticate`` RFC 6750 asks for."""
    challenge = 'Bearer realm="chat-history"'
    if request.headers.get("authorization") is None:
        detail = "this service needs an API key: send it as `Authorization: Bearer <key>`"
    else:
        detail = "the API key is not valid: send `Authorization: Bearer <key>` with a key the service was given"
        challenge += ', error="invalid_token"'
    return Refused(401, detail, headers={"WWW-Authenticate": challenge})
