"""Summary checkpoints from the provider's side: when to append one, how to ask the model (docs/conversations.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_framework import Message

from ..vocabulary import SUMMARY_THROUGH
from .window import estimate_tokens

__all__ = ["SUMMARY_PROMPT", "Compaction"]

SUMMARY_PROMPT = (
    "Summarize the conversation so far for your own later use, in the conversation's language. Keep every "
    "tool call's result that later messages may rely on (dates, times, numbers, identifiers) exactly as it was "
    "returned. Answer with the summary only."
)


@dataclass(frozen=True)
class Compaction:
    """When the provider writes a summary checkpoint, and what it asks for."""

    max_messages: int | None = 40  #: write one once the summary view holds more than this many messages
    max_tokens: int | None = None  #: ... or more than this many tokens, as ``count_tokens`` counts them
    prompt: str = SUMMARY_PROMPT  #: the request appended, as a user message, to the view the model summarizes
    count_tokens: Callable[[Message], int] = field(default=estimate_tokens, compare=False)  #: a message's tokens

    def __post_init__(self) -> None:
        if self.max_messages is None and self.max_tokens is None:
            raise ValueError("a Compaction needs max_messages or max_tokens: when else would it summarize?")
        for name in ("max_messages", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 2):
                raise ValueError(f"{name} must be a whole number of 2 or more, not {value!r}")

    def due(self, view: Sequence[Message]) -> bool:
        """Whether the summary view has grown past a threshold."""
        if self.max_messages is not None and len(view) > self.max_messages:
            return True
        return self.max_tokens is not None and sum(map(self.count_tokens, view)) > self.max_tokens

    async def summarize(self, chat_client: Any, view: Sequence[Message], through: int) -> Message:
        """Ask ``chat_client`` to summarize ``view``; the answer as a checkpoint of messages 1..``through``."""
        response = await chat_client.get_response([*view, Message("user", [self.prompt])])
        if not (text := response.text.strip()):
            raise ValueError("the model answered the summary request with no text: no checkpoint was written")
        return Message("assistant", [text], additional_properties={SUMMARY_THROUGH: through})
