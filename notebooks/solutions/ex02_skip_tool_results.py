"""Notebook 2, "On your own": a provider whose load hook leaves out the tool calls and the tool results."""

from typing import Any

from agent_framework import Message
from remote_provider import RemoteChatHistoryProvider


def is_tool_step(message: Message) -> bool:
    """A tool result (role ``tool``), or an assistant message that calls a tool."""
    return str(message.role) == "tool" or any(content.type == "function_call" for content in message.contents)


class SkipToolResultsProvider(RemoteChatHistoryProvider):
    """Loads the question and answer texts only; stores every message, as the article's provider does."""

    async def get_messages(self, session_id: Any, *, state: dict[str, Any] | None = None, **kwargs: Any) -> list[Message]:
        messages = await super().get_messages(session_id, state=state, **kwargs)
        return [message for message in messages if not is_tool_step(message)]
