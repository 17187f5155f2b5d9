"""Reading one field of a stored message (its UTF-8 JSON bytes) cheaply: most messages do not mention the field a
reader looks for, so only those whose bytes mention it are decoded. The service and the stores both read this way."""

from __future__ import annotations

from typing import Any

import msgspec


def object_mentioning(message: bytes, mark: bytes) -> dict[str, Any] | None:
    """The stored message as a JSON object when its bytes mention ``mark``; ``None`` without decoding it otherwise
    (most messages do not mention what a reader looks for), or when it is not an object."""
    if mark not in message:
        return None
    try:
        item = msgspec.json.decode(message)
    except msgspec.DecodeError:
        return None
    return item if isinstance(item, dict) else None
