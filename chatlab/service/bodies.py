"""A write's body: read raw and parsed once (:mod:`chatlab.service.schema`), within every size limit.

The service never lets FastAPI parse a body: it would build models of every message and
encode them again; here each message comes out as the compact JSON bytes the store keeps.

A large body is parsed, checked and encoded in a worker thread, one at a time, so that it
cannot stall the event loop: the worst body the default limits allow (8 MiB of about 500,000
tiny content items) takes about a second of CPU, during which every other request would wait.
The work is done in pieces that each hold the GIL briefly (:data:`pieces.SIZE` content items), so the loop
gets its turns; ``python -m chatlab bench`` measures what a concurrent ``GET /`` waits.
"""

from __future__ import annotations

import gc
import threading
from functools import partial

import anyio
from fastapi import Request
from starlette.requests import ClientDisconnect

from ..vocabulary import Refused
from . import schema as wire
from .security.browser import is_json
from .settings import ServiceSettings

#: Bodies up to this size are decoded on the event loop: the worst of them takes about 3 ms, less
#: than handing it to a thread and back would add to every ordinary append.
INLINE_BYTES = 32 * 1024
_PAUSED_GC = threading.Lock()  # the collector is the process's: one thread at a time pauses it


class BodyReader:
    """Reads the messages of a write's body under ``settings``' limits (one per app: its limiter is its loop's)."""

    def __init__(self, settings: ServiceSettings) -> None:
        self._settings = settings
        self._decode = partial(
            wire.decode_messages_body,
            max_messages=settings.max_messages,
            max_message_bytes=settings.max_message_bytes,
        )
        self._limiter: anyio.CapacityLimiter | None = None

    async def __call__(self, request: Request) -> list[bytes]:
        """The checked, encoded messages of a JSON body (415 for another type), within every size limit."""
        content_type, declared = _content_headers(request.scope["headers"])
        _check_json(content_type)
        body = await self._read(request, declared)
        if len(body) <= INLINE_BYTES:
            return self._decode(body)
        if self._limiter is None:  # made here, on the loop that serves the app
            self._limiter = anyio.CapacityLimiter(1)  # one large body at a time: more would only share the GIL
        return await anyio.to_thread.run_sync(self._decode_paused, body, limiter=self._limiter)

    def _decode_paused(self, body: bytes) -> list[bytes]:
        """Decode with the cyclic garbage collector paused, one body at a time in the process.

        A full collection walks every object of the parsed document, holding the GIL (100-150 ms for
        the largest body), and it would run several times while the body's objects are made; it has
        nothing to find: a parsed document and its validation make no reference cycles, reference
        counting frees them.
        """
        with _PAUSED_GC:
            enabled = gc.isenabled()
            gc.disable()
            try:
                return self._decode(body, in_pieces=True)
            finally:
                if enabled:
                    gc.enable()

    async def _read(self, request: Request, declared: str) -> bytes:
        """The request body, refused with 413 as soon as it is known to exceed the limit.

        A body that does not all arrive within ``body_timeout`` is answered 408 by the connection
        (:mod:`.connections`), which then tells the app the client is gone: nothing is written.
        Read from ``receive`` itself: Starlette's ``request.stream()`` is an async generator, dearer per body.
        """
        limit = self._settings.max_body_bytes
        # 19 digits or more are over any limit, and are not made an int (of thousands of digits, int() raises)
        declared = declared.lstrip("0")
        if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
            raise self._too_large()
        chunks, size, receive = [], 0, request.receive
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _too_large(self) -> Refused:
        """The 413 of a body over the limit (built only when one is: this is every write's path)."""
        limit = self._settings.max_body_bytes
        return Refused(413, f"the body is larger than {limit} bytes: send fewer or smaller messages per request")


def _content_headers(headers: list[tuple[bytes, bytes]]) -> tuple[str | None, str]:
    """The first ``Content-Type`` (``None`` if there is none) and ``Content-Length`` (``""``), as Starlette's
    ``request.headers.get`` reads them, in one pass over the raw headers (not a ``Headers`` object per request)."""
    content_type = content_length = None
    for name, value in headers:
        if name == b"content-type":
            if content_type is None:
                content_type = value.decode("latin-1")
        elif name == b"content-length" and content_length is None:
            content_length = value.decode("latin-1")
    return content_type, content_length or ""


def _check_json(content_type: str | None) -> None:
    """415 for a body that is not JSON: what a cross-site form or a preflight-free ``fetch`` sends
    (:mod:`.security.browser`)."""
    if not is_json(content_type or ""):
        raise Refused(
            415, f"a write's body must be JSON: send Content-Type: application/json, not {content_type or 'none'}"
        )
