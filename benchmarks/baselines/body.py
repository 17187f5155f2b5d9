"""The request body every baseline takes, as a tutorial declares it: a pydantic model."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class Messages(BaseModel):
    """The request body: MEAI ``ChatMessage`` objects, kept as they came."""

    messages: list[dict[str, Any]]
