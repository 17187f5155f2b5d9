"""JSON responses written by hand, so the service decides their exact bytes.

FastAPI's own encoding would validate and re-encode every answer; the service's answers are
already plain data (or the stored messages' bytes), so it writes compact UTF-8 JSON itself.
"""

from __future__ import annotations

from typing import Any

import msgspec
from fastapi import Response

JSON = "application/json"
_encode = msgspec.json.Encoder().encode


def json_response(value: Any) -> Response:
    """``value`` as compact JSON, non-ASCII characters kept as they are (as the stored messages are)."""
    return Response(_encode(value), media_type=JSON)
