"""Each agent saves only what it added: an input handed to several agents at once (a fan-out) is stored once.

The framework's concurrent orchestration hands every agent the same message objects. The first provider to save one
to a conversation claims it there, and the others leave it out; a failed save gives its claims back. A claim lasts as
long as the message object (held weakly): a message object is stored once per conversation, so a new turn is a new
``Message``.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from agent_framework import Message, SessionContext

__all__ = ["claim_inputs"]

_claims: dict[int, tuple[weakref.ref[Message], set[str]]] = {}  # by id(message): the message, its conversations


def _conversations(message: Message) -> set[str]:
    """The conversations ``message`` is claimed in (a new, empty set for a message seen the first time)."""
    number = id(message)
    entry = _claims.get(number)
    if entry is None or entry[0]() is not message:  # none, or an id reused by a new object
        entry = (weakref.ref(message, partial(_forget, number)), set())
        _claims[number] = entry
    return entry[1]


def _forget(number: int, _: object) -> None:
    """Drop the claims of a message no longer alive (its id may be reused)."""
    _claims.pop(number, None)


@contextmanager
def claim_inputs(context: SessionContext, conversation: str) -> Iterator[None]:
    """Within the block, ``context``'s input is what no other run claimed in ``conversation``; those messages are
    claimed, and given back if the block fails (the save did not happen)."""
    claimed = [message for message in context.input_messages if conversation not in _conversations(message)]
    for message in claimed:
        _conversations(message).add(conversation)
    context.input_messages = claimed
    try:
        yield
    except BaseException:
        for message in claimed:
            _conversations(message).discard(conversation)
        raise
