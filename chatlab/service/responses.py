"""JSON responses written by hand: the answers are plain data or the stored messages' bytes, which FastAPI's
encoding would validate and re-encode."""

from __future__ import annotations

from typing import Any

import msgspec
from fastapi import Response
from starlette.types import Receive, Scope, Send

JSON = "application/json"
_encode = msgspec.json.Encoder().encode


def json_response(value: Any) -> Response:
    """``value`` as compact JSON, non-ASCII characters kept as they are (as the stored messages are)."""
    return Response(_encode(value), media_type=JSON)


class Answer(Response):
    """A ``Response`` whose headers are given as the bytes sent (Starlette's would lower-case, encode and scan them:
    these routes' headers are few and known); ``headers`` reads and changes them as usual."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes = b"") -> None:
        self.status_code = status
        self.raw_headers = headers
        self.body = body
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body})


def json_answer(body: bytes, headers: list[tuple[bytes, bytes]]) -> Answer:
    """A 200 with a JSON body (already encoded) after ``headers``, as ``Response`` would send it."""
    headers += [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
    return Answer(200, headers, body)
