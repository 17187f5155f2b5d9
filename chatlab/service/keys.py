"""The one key rule: what a conversation key may be, checked by one function with one regex engine (Python's ``re``)
wherever a key arrives: the path, the listing's ``after``, a fork's new key, import and migrate. So whatever the
service stores and lists, its own ``Link`` pages past."""

from __future__ import annotations

import re
from typing import Any

from ..stores.metadata import unstorable
from ..vocabulary import Refused
from .settings import KEY_PATTERN, ServiceSettings


class KeyRule:
    """The configured rule (``key_pattern``, ``key_max_length``) and the control characters no store keeps."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.pattern = settings.key_pattern
        self.max_length = settings.key_max_length
        self._pattern = re.compile(settings.key_pattern)

    def fits(self, key: str) -> bool:
        """Whether ``key`` is a valid conversation key."""
        if not 1 <= len(key) <= self.max_length:
            return False
        return self._pattern.fullmatch(key) is not None and not unstorable(key)

    def check(self, key: str, what: str = "conversationKey") -> str:
        """``key`` if valid; else a 400 that names ``what`` carried it and says what a key is."""
        if unstorable(key):  # whatever the pattern allows: no store keeps them all (PostgreSQL refuses NUL)
            raise Refused(400, f"invalid {what}: it holds a control character (such as NUL); remove it")
        if not self.fits(key):
            raise Refused(400, f"invalid {what}: {self.words()}")
        return key

    def words(self) -> str:
        """What a valid key is, in words for people when the pattern is the default one."""
        if self.pattern == KEY_PATTERN:
            return f"use 1 to {self.max_length} letters, digits, '_' or '-' (for example a GUID without dashes)"
        return f"use 1 to {self.max_length} characters matching {self.pattern}"

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of a key, for OpenAPI."""
        return {"type": "string", "pattern": self.pattern, "minLength": 1, "maxLength": self.max_length}
