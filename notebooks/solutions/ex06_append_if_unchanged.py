"""Notebook 6, "On your own": add a message at the end of a conversation only if nobody wrote since it was read."""

from typing import Any

import httpx


async def append_if_unchanged(http: httpx.AsyncClient, key: str, message: dict[str, Any]) -> bool:
    """Read the conversation, write it back with ``message`` at its end under ``If-Match``; ``False`` on ``412``."""
    read = await http.get(f"/chat-history/{key}")
    read.raise_for_status()
    written = await http.put(
        f"/chat-history/{key}",
        json={"messages": [*read.json(), message]},
        headers={"If-Match": read.headers["ETag"]},
    )
    if written.status_code == 412:  # someone wrote in between: nothing of ours was stored
        return False
    written.raise_for_status()
    return True
