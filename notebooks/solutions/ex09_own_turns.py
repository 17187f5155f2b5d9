"""Notebook 9, "On your own": the own-turns view, by hand."""

from agent_framework import Message


def my_own_turns(messages: list[Message], agent: str) -> list[Message]:
    """The user's messages and ``agent``'s own (its answers, tool calls and their results); no other agent's.

    A tool result belongs to the agent whose call it answers (by the call's id), whatever author it carries.
    """
    callers: dict[str, str | None] = {}
    kept = []
    for message in messages:
        owner = message.author_name if message.role in ("assistant", "tool") else None
        for content in message.contents:
            if content.type == "function_call":
                callers[content.call_id] = owner
            elif content.type == "function_result" and owner is None:
                owner = callers.get(content.call_id)
        if owner in (None, agent):
            kept.append(message)
    return kept
