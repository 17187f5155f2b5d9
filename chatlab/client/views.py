"""What each agent of a shared conversation is shown: a view computed from the transcript (DESIGN decision 22).

Several agents, each with its own :class:`~chatlab.client.provider.RemoteChatHistoryProvider`, can share one
conversation key: the service keeps **one** transcript, every assistant message naming its author (MEAI
``authorName``, the framework's ``author_name``). What a model is handed is a *view* of that transcript, chosen per
provider with ``view=``; it is computed on each run from the cached messages, never stored as a second copy:

- :func:`whole_transcript` (the default): every message as stored;
- :func:`own_turns`: the user's messages and the agent's own, with its tool steps;
- :func:`others_as_input`: the whole transcript, the other agents' answers given as user messages ``"[Planner] ..."``
  (their tool steps left out), so a model never takes another agent's words for its own turns;
- any function of the same shape, ``(transcript, agent name) -> messages``.

A message without an author (a conversation written before authors, a system message) belongs to nobody: every view
keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agent_framework import Message, SessionContext

__all__ = [
    "View",
    "agent_name",
    "name_the_author",
    "others_as_input",
    "own_turns",
    "owners",
    "show_view",
    "whole_transcript",
]

View = Callable[[Sequence[Message], str | None], Sequence[Message]]
"""A view: from the transcript (oldest first) and the agent's name, the messages its model is handed."""

_AGENTS_ROLES = frozenset({"assistant", "tool"})  # what an agent writes; user and system messages belong to nobody


def agent_name(agent: Any) -> str | None:
    """The name an agent signs its messages with (``agent.name``), ``None`` for an agent without one."""
    name = getattr(agent, "name", None)
    return name if isinstance(name, str) and name else None


def name_the_author(messages: Sequence[Message], author: str | None) -> None:
    """Sign the agent's messages the framework left unsigned (assistant and tool messages without an author)."""
    if author is None:
        return
    for message in messages:
        if message.role in _AGENTS_ROLES and message.author_name is None:
            message.author_name = author


def owners(messages: Sequence[Message]) -> list[str | None]:
    """Each message's owner: the author of an assistant or tool message, for a tool result without one the author of
    the call it answers; ``None`` for user and system messages and for unsigned ones."""
    callers: dict[str, str | None] = {}
    found: list[str | None] = []
    for message in messages:
        owner = message.author_name if message.role in _AGENTS_ROLES else None
        for content in message.contents:
            call_id = getattr(content, "call_id", None)
            if not isinstance(call_id, str):
                continue
            if content.type == "function_call":
                callers[call_id] = owner
            elif owner is None and message.role == "tool":
                owner = callers.get(call_id)
        found.append(owner)
    return found


def whole_transcript(messages: Sequence[Message], agent: str | None) -> Sequence[Message]:
    """Every message as stored (the cached sequence itself, no copy)."""
    return messages


def own_turns(messages: Sequence[Message], agent: str | None) -> Sequence[Message]:
    """The user's messages and the agent's own (with its tool calls and results); other agents' left out."""
    return [message for message, owner in zip(messages, owners(messages), strict=True) if owner in (None, agent)]


def others_as_input(messages: Sequence[Message], agent: str | None) -> Sequence[Message]:
    """The whole transcript, each other agent's answer given as a user message ``"[Author] text"`` (its tool steps,
    which the model could not tell from its own calls, left out)."""
    shown: list[Message] = []
    for message, owner in zip(messages, owners(messages), strict=True):
        if owner in (None, agent):
            shown.append(message)
        elif message.role == "assistant" and message.text:
            shown.append(Message("user", [f"[{owner}] {message.text}"]))
    return shown


def show_view(context: SessionContext, source_id: str, view: View, agent: str | None) -> None:
    """Hand the model ``view`` of what the provider loaded. A workflow's input that repeats other agents' turns was
    already read as a replay (:mod:`.resend`): those turns are in the loaded history, where the view attributes them
    as it does every stored one."""
    history = context.context_messages.get(source_id, [])
    context.context_messages[source_id] = list(view(history, agent))
