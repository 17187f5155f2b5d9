"""Request heads the app refuses itself: a URL or header fields too long for any request it serves.

uvicorn's HTTP parsers bound a request's head differently, and answer past their bound before the
app sees anything: h11 (uvicorn's pure-Python parser) refuses a head over 16 KiB that does not arrive
in one read (one that does may reach 64 KiB) with a plain-text ``400 Invalid HTTP request received.``;
httptools sets no bound of its own. Every head that reaches the app is held to these limits, answered
as problem JSON like every other refusal: ``414`` for a URL (path and query) over :data:`MAX_URL_BYTES`,
``431`` for header fields over :data:`MAX_HEADER_BYTES` in all. The service's own requests need a
fraction of either (a key is at most 128 characters; an API key, a version, an idempotency key).

A head whose servers and proxies may read two ways is refused with 400, on either parser: two ``Host``
fields (which names the target?), and ``Content-Length`` with ``Transfer-Encoding`` (where does the
body end? RFC 9112 section 6.1 says a server may refuse it, and the usual request smuggling needs it).
The connection is then closed, so nothing after the head is read as another request. The size of a
head while it arrives is bounded before this, by the server (:mod:`.server_protocol`).
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
