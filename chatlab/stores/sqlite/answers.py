"""Answering callers on their event loops from the store's threads (:mod:`.writer`, :mod:`.readers`): a future is
completed on its own loop (``call_soon_threadsafe``), and many answers at once wake each loop once."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

Answer = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Any, BaseException | None]  # result or exception


def settle(answers: list[Answer]) -> None:
    """Answer callers on their own loops, one call per loop (a caller that gave up, or a closed loop, waits no more)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Answer]] = {}
    for answer in answers:
        by_loop.setdefault(answer[0], []).append(answer)
    for loop, some in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(_answer, some)


def _answer(answers: list[Answer]) -> None:
    for _, future, result, error in answers:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
