"""Conversation keys: a GUID in .NET's "N" format (32 hex digits), as the article makes them."""

from __future__ import annotations

import secrets
import threading
import time

__all__ = ["new_conversation_key"]

_last_key = 0
_key_lock = threading.Lock()


def new_conversation_key(_session: object = None) -> str:
    """A time-ordered UUID version 7 (RFC 9562), increasing within a process: listings by key follow the order
    conversations began, database indexes grow at their end. The argument is unused."""
    global _last_key
    with _key_lock:
        value = max(((time.time_ns() // 1_000_000) << 74) | secrets.randbits(74), _last_key + 1)
        _last_key = value
    millis, rand_a, rand_b = value >> 74, (value >> 62) & 0xFFF, value & ((1 << 62) - 1)
    return f"{(millis << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b:032x}"
