"""Resent transcripts: how a run's input lines up with the history the provider loaded.

A chat UI that keeps its own copy of the conversation sends it again with every new turn, sometimes edited, sometimes
without the tool steps it does not show. History is append-only, so the input is read against the stored transcript
(docs/conversations.md, "Resent transcripts"):

- a **replay** repeats the end of the history (tool steps the UI left out skipped): only what follows is new;
- a **divergence** lines up with the history but differs from it at some stored message: a branch from there;
- anything else is an ordinary turn, all new.

Two messages are the same when their wire form (the compact JSON the service keeps) is the same, an id that only one
of them carries left out: a copy of a stored message matches it, an edited one does not, whatever its ``message_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
from agent_framework import Message

from ..vocabulary import link_of
from .codec import message_to_meai

__all__ = ["Alignment", "align", "is_tool_step", "same_message"]

_ATTRIBUTION = "_attribution"  # what MAF adds to the messages a provider loads: not part of the message


def _wire(message: Message, *, with_id: bool) -> bytes:
    """The message's stored form, without MAF's load attribution (and without its id unless ``with_id``)."""
    item = message_to_meai(message)
    extra = item.get("additionalProperties")
    if isinstance(extra, dict) and _ATTRIBUTION in extra:
        item["additionalProperties"] = {k: v for k, v in extra.items() if k != _ATTRIBUTION}
        if not item["additionalProperties"]:
            del item["additionalProperties"]
    if not with_id:
        item.pop("messageId", None)
    return msgspec.json.encode(item)


def same_message(a: Message, b: Message) -> bool:
    """The same message: the same wire form, ids compared only when both carry one."""
    if a is b:
        return True
    both_have_ids = a.message_id is not None and b.message_id is not None
    return _wire(a, with_id=both_have_ids) == _wire(b, with_id=both_have_ids)


def is_tool_step(message: Message) -> bool:
    """A message holding only tool calls or their results: what a UI may leave out of what it shows and resends."""
    return bool(message.contents) and all(link_of(content.type) is not None for content in message.contents)


@dataclass(frozen=True, slots=True)
class Alignment:
    """How an input lines up with a history (indexes into the two lists).

    ``replayed``: the input's leading messages the history already holds; the rest of the input is new.
    ``diverges_at``: the index of the first history message the input differs from (``None``: no divergence). The
    branch keeps ``history[:diverges_at]`` and continues with ``input[replayed:]``.
    """

    replayed: int = 0
    diverges_at: int | None = None


@dataclass(slots=True)
class _Walk:
    """The input laid over the history from one start: what matched, where it first differed, where it stopped."""

    start: int
    matches: int = 0
    mismatches: int = 0
    first_difference: tuple[int, int] | None = None  # (input index, history index)
    input_end: int = 0
    history_end: int = 0


def _walk(history: Sequence[Message], batch: Sequence[Message], start: int) -> _Walk:
    """Compare ``batch`` with ``history[start:]`` message by message, skipping tool steps the batch leaves out."""
    walk = _Walk(start)
    i = 0  # the input's message being placed
    j = start  # the history's message it is compared with
    while i < len(batch) and j < len(history):
        if same_message(batch[i], history[j]):
            walk.matches += 1
            i += 1
        elif is_tool_step(history[j]) and not is_tool_step(batch[i]):
            pass  # a tool step the UI does not show: skipped, not a difference
        else:
            walk.mismatches += 1
            if walk.first_difference is None:
                walk.first_difference = (i, j)
            i += 1
        j += 1
    walk.input_end = i
    walk.history_end = j
    return walk


def _reaches_end(history: Sequence[Message], walk: _Walk) -> bool:
    """Whether the walk covered the history to its end (tool steps left at the end count as covered)."""
    return all(is_tool_step(message) for message in history[walk.history_end :])


def _evidence_of_resend(walk: _Walk) -> bool:
    """More of the input matches than differs; as many suffice from the conversation's first loaded message, where a
    UI's transcript starts (an ordinary input that happens to repeat one message has as much new as old)."""
    return walk.matches > walk.mismatches or (walk.start == 0 and walk.matches == walk.mismatches)


def align(history: Sequence[Message], batch: Sequence[Message]) -> Alignment:
    """How ``batch`` (a run's input) lines up with ``history`` (what the provider loaded).

    A single message is read against the history's end alone (:func:`_align_one`). For more, every start in the
    history is tried; the one where most messages match wins (the earliest on a tie). No match
    means an ordinary turn. A walk without a difference that covers the history's end is a replay. A walk that
    differs, or that stops before the history's end, is a divergence when the input has more than one message (a
    single repeated message is an ordinary turn) and :func:`_evidence_of_resend` holds."""
    if not history or not batch:
        return Alignment()
    if len(batch) == 1:
        return _align_one(history, batch[0])
    best = max((_walk(history, batch, start) for start in range(len(history))), key=lambda walk: walk.matches)
    if best.matches == 0:
        return Alignment()
    if best.first_difference is None and _reaches_end(history, best):
        return Alignment(replayed=best.input_end)
    if len(batch) < 2 or not _evidence_of_resend(best):
        return Alignment()
    if best.first_difference is not None:
        first_input, first_history = best.first_difference
        return Alignment(replayed=first_input, diverges_at=first_history)
    return Alignment(replayed=best.input_end, diverges_at=best.history_end)


def _align_one(history: Sequence[Message], message: Message) -> Alignment:
    """One input message (an agent's ordinary turn): a replay when it repeats the history's last message, tool steps
    after it skipped; anything else is an ordinary turn, since one message cannot tell an edit from a new question.
    Only the end of the history is read, so a turn costs the same however long the conversation is."""
    for stored in reversed(history):
        if is_tool_step(message) or not is_tool_step(stored):
            return Alignment(replayed=1) if same_message(message, stored) else Alignment()
    return Alignment()
