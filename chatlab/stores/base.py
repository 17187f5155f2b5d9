"""The store interface the chat history service is written against.

The HTTP layer validates and encodes messages; a store only keeps them. Each message is
held as the UTF-8 JSON bytes the service produced from the request, so what a client
POSTs is what it GETs back and a read never re-encodes anything.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

EncodedMessage = bytes
"""One chat message as compact UTF-8 JSON (the article's ``ChatMessage`` wire format)."""


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """The article's ``ChatHistorySummary``: a conversation key and how many messages it holds."""

    conversation_key: str
    message_count: int


class StoreError(Exception):
    """The store could not do its job (database down, timeout); the service answers 503."""


class ChatHistoryStore(ABC):
    """Keeps an ordered list of encoded messages per conversation key.

    Implementations guarantee: a batch passed to :meth:`append` is stored atomically and
    contiguously, in order, whatever else is appended to the same conversation meanwhile;
    :meth:`replace` and :meth:`delete` are atomic; :meth:`summaries` is ordered by key.
    """

    #: One line for ``GET /``: where this store keeps the history.
    description: str = "Chat history store."

    @abstractmethod
    async def get(self, conversation_key: str) -> list[EncodedMessage]:
        """The messages of a conversation in order; ``[]`` for an unknown key."""

    @abstractmethod
    async def append(self, conversation_key: str, messages: Sequence[EncodedMessage]) -> None:
        """Add a batch at the end of a conversation, creating it if needed. An empty batch does nothing."""

    @abstractmethod
    async def replace(self, conversation_key: str, messages: Sequence[EncodedMessage]) -> None:
        """Make the conversation hold exactly ``messages`` (an empty list keeps an empty conversation)."""

    @abstractmethod
    async def delete(self, conversation_key: str) -> None:
        """Forget a conversation; deleting an unknown key is not an error."""

    @abstractmethod
    async def summaries(self) -> list[ConversationSummary]:
        """Every conversation with its exact message count, ordered by key."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the in-memory store has none."""
