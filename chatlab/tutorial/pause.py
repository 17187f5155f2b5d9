"""``pause(seconds)``: the article's ``Task.Delay`` as a countdown that the stop button ends at once.

``await asyncio.sleep(10)`` in a notebook cell notices the kernel's interrupt only when the sleep ends;
``time.sleep`` in short steps is interrupted within a step, and the countdown shows that something is happening.
It is a plain function (call it without ``await``): it blocks the cell, not the servers, which run in their own
threads. Give it a cell of its own: in a cell that also awaits, ipykernel turns the stop button into a cancellation
that lands only at the cell's next ``await``, after the pause. The countdown rewrites one line with ``\\r``;
Jupyter, nbval and nbconvert keep only its last state, so a finished pause always leaves the same text behind.
"""

from __future__ import annotations

import math
import sys
import time

__all__ = ["pause"]

STEP = 0.1  # seconds between checks: an interrupt stops the pause within one step


def pause(seconds: float, *, label: str = "waiting") -> None:
    """Wait ``seconds`` with a countdown; an interrupt (the stop button, Ctrl+C) ends it within a step.

    Leaves one line behind, ``waited 10 s`` (or ``stopped: ...`` and ``KeyboardInterrupt`` when interrupted).
    """
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"pause needs a number of seconds >= 0, not {seconds!r}")
    end = time.monotonic() + seconds
    width = 0
    shown: int | None = None

    def line(text: str, *, final: bool = False) -> None:
        nonlocal width
        sys.stdout.write("\r" + text.ljust(width) + ("\n" if final else ""))
        sys.stdout.flush()
        width = max(width, len(text))

    try:
        while (left := end - time.monotonic()) > 0:
            whole = math.ceil(left)
            if whole != shown:
                line(f"{label}: {whole} s left")
                shown = whole
            time.sleep(min(STEP, left))
    except KeyboardInterrupt:
        line(f"stopped: {seconds - max(end - time.monotonic(), 0):.1f} s of {seconds:g} s waited", final=True)
        raise
    line(f"waited {seconds:g} s", final=True)
