"""What the client side and the service side both speak: one home for each shared idea.

Both sides import this module; it imports neither of them, so the arrows run
``tutorial -> client -> vocabulary`` and ``service -> stores -> vocabulary``.

* the environment variables chatlab reads;
* :class:`ConversationSummary`, the article's ``ChatHistorySummary``;
* :class:`Version`, a conversation's version (its ``ETag``) with its one format and parser;
* :class:`Refused`, a request the service refuses (it becomes problem JSON).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ABSENT",
    "API_KEY_VARIABLE",
    "DEFAULT_SERVICE_URL",
    "SERVICE_URL_VARIABLE",
    "ConversationSummary",
    "Refused",
    "Version",
]

SERVICE_URL_VARIABLE = "CHAT_HISTORY_SERVICE_URL"
"""Where the chat history service runs (the article's variable)."""

API_KEY_VARIABLE = "CHAT_HISTORY_SERVICE_API_KEY"
"""The API key a client sends to a service with keys on (docs/protections.md)."""

DEFAULT_SERVICE_URL = "http://localhost:5000"
"""The article's service address, used when ``CHAT_HISTORY_SERVICE_URL`` is not set."""

ABSENT = "0"
"""The version of a conversation that does not exist (never written, or deleted)."""


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """The article's ``ChatHistorySummary``: a conversation key and how many messages it holds."""

    conversation_key: str
    message_count: int


@dataclass(frozen=True, slots=True)
class Version:
    """A conversation's version: ``"<generation>.<count>"``, or ``"0"`` when it does not exist.

    The generation is a random token fixed from the conversation's creation (or last replace) until
    it is next replaced or deleted; the count is how many messages it holds. Within one generation a
    conversation only grows, which is what lets a client read only what is new.
    """

    generation: str | None
    count: int

    def __str__(self) -> str:
        return ABSENT if self.generation is None else f"{self.generation}.{self.count}"

    @property
    def etag(self) -> str:
        """The version as an HTTP ``ETag`` (a strong entity tag: quoted)."""
        return f'"{self}"'

    @classmethod
    def parse(cls, text: str) -> Version | None:
        """The version that ``text`` (``"g.N"`` or ``"0"``, unquoted) spells, or ``None`` if it is not one."""
        if text == ABSENT:
            return cls(None, 0)
        generation, dot, count = text.rpartition(".")
        if not dot or not generation or not count.isdigit() or not count.isascii():
            return None
        return cls(generation, int(count))

    @classmethod
    def from_etag(cls, etag: str | None) -> Version | None:
        """The version in an ``ETag`` header, or ``None`` if there is none or it is not one of ours."""
        tag = (etag or "").strip()
        if tag.startswith("W/") or len(tag) < 3 or tag[0] != '"' or tag[-1] != '"':
            return None
        return cls.parse(tag[1:-1])

    def continues(self, generation: str | None, count: int, added: int) -> bool:
        """Whether this version is what holding ``count`` messages of ``generation`` plus ``added`` more gives."""
        return self.count == count + added and (
            count == 0 or (generation is not None and self.generation == generation)
        )


@dataclass(eq=False)
class Refused(Exception):
    """A request the service refuses: ``status``, what is wrong (``detail``), and what goes with it.

    The service answers it as RFC 9457 problem JSON; ``errors`` lists each invalid field of a
    body, ``headers`` what the answer carries (``Retry-After``, ``ETag``).
    """

    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.detail)
