"""A write's body: read raw and parsed once (:mod:`chatlab.service.schema`), within every size limit.

The service never lets FastAPI parse a body: it would build models of every message and
encode them again; here each message comes out as the compact JSON bytes the store keeps.
"""

from __future__ import annotations

from fastapi import Request

from ..vocabulary import Refused
from . import schema as wire
from .settings import ServiceSettings


async def read_messages(request: Request, settings: ServiceSettings) -> list[bytes]:
    """The checked, encoded messages of a body, within every size limit."""
    messages = wire.decode_messages_body(await _read_body(request, settings), max_messages=settings.max_messages)
    if settings.max_message_bytes is not None:
        for i, message in enumerate(messages):
            if len(message) > settings.max_message_bytes:
                raise Refused(
                    413,
                    f"messages[{i}] is {len(message)} bytes as compact JSON; the limit is "
                    f"{settings.max_message_bytes} bytes per message",
                )
    return messages


async def _read_body(request: Request, settings: ServiceSettings) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed the limit."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > settings.max_body_bytes:
        raise _too_large(settings)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > settings.max_body_bytes:
            raise _too_large(settings)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(settings: ServiceSettings) -> Refused:
    """The 413 of a body over the limit (built only when one is: this is every write's path)."""
    return Refused(
        413, f"the body is larger than {settings.max_body_bytes} bytes: send fewer or smaller messages per request"
    )
