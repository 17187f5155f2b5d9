"""Request heads the app refuses itself, as problem JSON on either parser (h11 and httptools bound heads differently).

``414`` for a URL over :data:`MAX_URL_BYTES`, ``431`` for header fields over :data:`MAX_HEADER_BYTES` in all; ``400``
and a close for a head proxies may read two ways: two ``Host`` fields, or ``Content-Length`` with ``Transfer-Encoding``
(request smuggling, RFC 9112 section 6.1). A head's size while it arrives is :mod:`.server_protocol`'s.
"""

from __future__ import annotations

from starlette.types import Scope

#: RFC 9110 section 4.1 asks servers to take URLs of at least 8,000 octets.
MAX_URL_BYTES = 8 * 1024
#: Names and values, with the 4 bytes of ": " and CRLF each line takes.
MAX_HEADER_BYTES = 8 * 1024


def head_refusal(scope: Scope) -> tuple[int, str] | None:
    """The status and detail of a refusal of this request's head, or ``None`` (see :mod:`.guard`)."""
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


#: The statuses of :func:`head_refusal` after which the connection is closed: what follows may not be a request.
CLOSING = frozenset({400, 431})
