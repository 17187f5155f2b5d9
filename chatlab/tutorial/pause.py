"""``pause(seconds)``: the article's ``Task.Delay`` as a countdown that the stop button ends at once.

``time.sleep`` in short steps notices an interrupt within a step (``await asyncio.sleep`` only when it ends); give it
a cell of its own (ipykernel stops a cell that awaits only at its next ``await``). It rewrites one line with ``\\r``,
so a finished pause always leaves the same text.
"""

from __future__ import annotations

import math
import sys
import time

STEP = 0.1  # seconds between checks: an interrupt stops the pause within one step


def pause(seconds: float, *, label: str = "waiting") -> None:
    """Wait ``seconds`` with a countdown, leaving ``waited 10 s`` (or ``stopped: ...`` and ``KeyboardInterrupt``)."""
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
