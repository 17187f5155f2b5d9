"""The first layer every request passes: its ``Host`` (:mod:`.security.browser`), then its head (docs/protections.md,
"Limits and the rate limit"). One ASGI layer for all the checks, the outermost (before CORS, so a page never reads
these refusals): each layer costs a request about what these checks cost."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from .problems import problem_response
from .security.browser import ServedHosts

#: RFC 9110 section 4.1 asks servers to take URLs of at least 8,000 octets.
MAX_URL_BYTES = 8 * 1024
#: Names and values, with the 4 bytes of ": " and CRLF each line takes.
MAX_HEADER_BYTES = 8 * 1024
#: The refusals after which the connection is closed: what follows may not be a request.
CLOSING = frozenset({400, 431})


def head_refusal(scope: Scope) -> tuple[int, str] | None:
    """The status and detail of a refusal of this request's head, or ``None``."""
    url = len(scope.get("raw_path") or scope["path"].encode()) + len(scope["query_string"])
    if url > MAX_URL_BYTES:
        return 414, f"the URL is {url} bytes; the limit is {MAX_URL_BYTES}: conversation keys are short"
    headers, hosts, framing = 0, 0, 0
    for name, value in scope["headers"]:
        headers += len(name) + len(value) + 4
        if name == b"host":
            hosts += 1
        elif name == b"content-length" or name == b"transfer-encoding":
            framing |= 1 if name == b"content-length" else 2
    if headers > MAX_HEADER_BYTES:
        return 431, f"the header fields are {headers} bytes in all; the limit is {MAX_HEADER_BYTES}"
    if hosts > 1:
        return 400, "the request has more than one Host header: send one"
    if framing == 3:
        return 400, "the request has both Content-Length and Transfer-Encoding: send one of them"
    return None


class RequestGuard:
    """ASGI middleware: refuse a request for a ``Host`` the service does not serve, or with a head it refuses."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.hosts = ServedHosts(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.hosts.refusal(scope) or head_refusal(scope)
            if refusal is not None:
                response = problem_response(*refusal)
                if refusal[0] in CLOSING:
                    response.headers["Connection"] = "close"
                return await response(scope, receive, send)
        await self.app(scope, receive, send)
