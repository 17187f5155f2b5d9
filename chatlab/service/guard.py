"""The first layer every request passes: its ``Host`` (:mod:`.security.browser`), then its head's size (:mod:`.heads`).

One ASGI layer for both checks, and the outermost (before CORS, so a page never reads these refusals):
each layer a request passes through costs it about what these checks cost.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from .heads import CLOSING, head_refusal
from .problems import problem_response
from .security.browser import ServedHosts


class RequestGuard:
    """ASGI middleware: refuse a request for a ``Host`` the service does not serve, or with too large a head."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.hosts = ServedHosts(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(scope)
            if refusal is not None:
                response = problem_response(*refusal)
                if refusal[0] in CLOSING:
                    response.headers["Connection"] = "close"
                return await response(scope, receive, send)
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """The status and detail of this request's refusal, or ``None`` to serve it."""
        return self.hosts.refusal(scope) or head_refusal(scope)
