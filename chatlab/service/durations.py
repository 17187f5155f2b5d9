"""Durations as people write them: ``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (``--retention``)."""

from __future__ import annotations

import math
import re

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_duration(text: str, *, what: str = "duration") -> float:
    """Seconds in ``text``: a positive number and one unit of s, m, h, d or w (``30d``: thirty days)."""
    match = _DURATION.match(text.lower())
    seconds = float(match.group(1)) * _UNITS[match.group(2)] if match else 0.0
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(
            f"invalid {what} {text!r}: write a positive number and a unit, s, m, h, d or w (for example 30d or 12h)"
        )
    return seconds


def format_duration(seconds: float) -> str:
    """The largest whole unit that says ``seconds`` exactly (``2592000`` -> ``30d``)."""
    for unit in "wdhm":
        if seconds % _UNITS[unit] == 0:
            return f"{int(seconds // _UNITS[unit])}{unit}"
    return f"{seconds:g}s"
