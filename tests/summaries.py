"""The article's fields of ``GET /chat-history``: what the tests compare (the times of writes vary)."""

from __future__ import annotations

import re
from typing import Any

_ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def article(listing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each summary's ``conversationKey`` and ``messageCount``, after checking that it has its times, in order."""
    for summary in listing:
        assert list(summary)[:2] == ["conversationKey", "messageCount"], summary
        assert _ISO_UTC.match(summary["createdAt"]) and _ISO_UTC.match(summary["updatedAt"]), summary
        assert summary["createdAt"] <= summary["updatedAt"], summary
    return [{"conversationKey": s["conversationKey"], "messageCount": s["messageCount"]} for s in listing]
