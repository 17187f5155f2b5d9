"""A large body's messages cut into validation calls of a bounded size, each knowing where its errors are:
pydantic holds the GIL for a whole call, so the event loop runs between the pieces."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal

#: The most content items one validation call takes.
SIZE = 256
#: Where an error of a piece is, as a location in the list of messages (pydantic's ``loc``).
Where = Callable[[tuple[Any, ...]], tuple[Any, ...]]
#: What a piece holds: consecutive messages, or part of one message's contents.
Kind = Literal["messages", "contents"]


def cut(messages: list[Any], key: str = "contents") -> Iterator[tuple[Kind, Any, Where]]:
    """The pieces of ``messages``: consecutive ones together up to :data:`SIZE` items of ``key`` in all;
    a message with more is its other keys (an empty ``key`` list), then its ``key`` list a piece at a time."""
    start, items = 0, 0
    for i, message in enumerate(messages):
        listed = message.get(key) if isinstance(message, dict) else None
        count = len(listed) if isinstance(listed, list) else 0
        if items + count + 1 > SIZE and start < i:
            yield "messages", messages[start:i], shifted(start)
            start, items = i, 0
        if count <= SIZE:
            items += count + 1
            continue
        yield "messages", [{**message, key: []}], shifted(i)
        for j in range(0, count, SIZE):
            yield "contents", listed[j : j + SIZE], shifted(j, i, key)  # type: ignore[index]  # a list: count > 0
        start, items = i + 1, 0
    if start < len(messages):
        yield "messages", messages[start:], shifted(start)


def shifted(offset: int, *within: Any) -> Where:
    """Where an error of ``messages[offset:]`` is in ``messages``; with ``within`` ``(i, key)``, an error of
    ``messages[i][key][offset:]``."""
    return lambda loc: (*within, loc[0] + offset, *loc[1:])
