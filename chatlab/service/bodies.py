"""A write's body, read raw and parsed once (:mod:`.schema`) within every size limit: FastAPI never parses it. A large
body is decoded in a worker thread, one at a time and in pieces (:mod:`.pieces`), so the event loop keeps its turns."""

from __future__ import annotations

import asyncio
from functools import partial

import anyio
from fastapi import Request
from starlette.requests import ClientDisconnect

from ..vocabulary import Refused
from . import schema as wire
from .security.browser import is_json
from .settings import ServiceSettings

#: A body up to this share of the largest one allowed is decoded on the event loop.
INLINE_SHARE = 1 / 256


class BodyReader:
    """Reads the messages of a write's body under ``settings``' limits (one per app: its limiter is its loop's)."""

    def __init__(self, settings: ServiceSettings) -> None:
        self._settings = settings
        self._decode = partial(
            wire.decode_messages_body, max_messages=settings.max_messages, max_message_bytes=settings.max_message_bytes
        )
        self._limiter: anyio.CapacityLimiter | None = None
        self.inline_bytes = int(settings.max_body_bytes * INLINE_SHARE)

    async def __call__(self, request: Request) -> list[bytes]:
        """The checked, encoded messages of a JSON body."""
        body = await self.json_bytes(request)
        if len(body) <= self.inline_bytes:
            return self._decode(body)
        if self._limiter is None:  # made here, on the loop that serves the app
            self._limiter = anyio.CapacityLimiter(1)  # one large body at a time: more would only share the GIL
        return await anyio.to_thread.run_sync(partial(self._decode, body, in_pieces=True), limiter=self._limiter)

    async def json_bytes(self, request: Request) -> bytes:
        """The raw bytes of a JSON body (415 for another type, what a cross-site form sends); 413 as soon as it is known
        to exceed the limit, 408 when it arrives too slowly (the connection is then closed: the rest may still come).
        Read from ``receive`` itself: Starlette's ``request.stream()`` is an async generator, dearer per body."""
        content_type = declared = None
        for name, value in request.scope["headers"]:  # the first of each, in one pass over the raw headers
            if name == b"content-type":
                if content_type is None:
                    content_type = value.decode("latin-1")
            elif name == b"content-length" and declared is None:
                declared = value.decode("latin-1")
        if not is_json(content_type or ""):
            raise Refused(
                415, f"a write's body must be JSON: send Content-Type: application/json, not {content_type or 'none'}"
            )
        limit = self._settings.max_body_bytes
        # 19 digits or more are over any limit, and are not made an int (of thousands of digits, int() raises)
        declared = (declared or "").lstrip("0")
        if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
            raise self._too_large()
        chunks, size, receive = [], 0, request.receive
        deadline: float | None = None
        while True:
            if deadline is None:
                message = await receive()
            else:
                try:
                    async with asyncio.timeout_at(deadline):
                        message = await receive()
                except TimeoutError:
                    detail = f"the body did not arrive within {self._settings.body_timeout:g} s: send it at once"
                    raise Refused(408, detail, headers={"Connection": "close"}) from None
            if message["type"] == "http.disconnect":
                raise ClientDisconnect()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
            if deadline is None:  # the body is still arriving: from now on it has body_timeout
                deadline = asyncio.get_running_loop().time() + self._settings.body_timeout

    def _too_large(self) -> Refused:
        limit = self._settings.max_body_bytes
        return Refused(413, f"the body is larger than {limit} bytes: send fewer or smaller messages per request")
