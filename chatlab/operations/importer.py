"""``chatlab import``: conversations from JSON Lines into a store or a service, safe to run again.

What happens to a conversation that already exists is the caller's choice (``--existing``):

* ``skip`` (the default): it is left as it is;
* ``replace``: it becomes the file's messages (unchanged when it already holds exactly them);
* ``append``: the file's messages go after its own, unless it already ends with them.

So running the same import twice changes nothing the second time, whichever the choice. Each
conversation is one write with the version read just before (``if_match`` / ``If-Match``): a
conversation written by someone else meanwhile is read again and decided again, never
overwritten blind, and never left half-imported. A bad line is reported with its number and
nothing of it is written; the other lines are imported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..stores.base import ABSENT, VersionMismatch
from .lines import BadLine, parse_line
from .places import Place, PlaceError

EXISTING_CHOICES = ("skip", "replace", "append")
ATTEMPTS = 5


@dataclass
class ImportReport:
    """What an import did: how many conversations had each outcome, and the lines refused."""

    outcomes: Counter[str] = field(default_factory=Counter)
    bad_lines: list[BadLine] = field(default_factory=list)

    def __str__(self) -> str:
        done = ", ".join(f"{count} {outcome}" for outcome, count in sorted(self.outcomes.items())) or "nothing"
        return f"{done}; {len(self.bad_lines)} bad lines"


async def import_conversations(place: Place, lines: Iterable[bytes], existing: str = "skip") -> ImportReport:
    """Import each line of ``lines`` (bytes, ``\\n`` or not) into ``place``."""
    if existing not in EXISTING_CHOICES:
        raise ValueError(f"existing must be one of {', '.join(EXISTING_CHOICES)}, not {existing!r}")
    report = ImportReport()
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            key, messages = parse_line(raw.rstrip(b"\r\n"), number)
            report.outcomes[await _import_one(place, key, messages, existing, number)] += 1
        except BadLine as bad:
            report.bad_lines.append(bad)
    return report


async def _import_one(place: Place, key: str, messages: list[bytes], existing: str, number: int) -> str:
    """Write one conversation as ``existing`` says; its outcome (created, replaced, appended, skipped, unchanged)."""
    for _ in range(ATTEMPTS):
        current, version = await place.read(key)
        try:
            if version == ABSENT:
                await place.replace(key, messages, ABSENT)
                return "created"
            if existing == "skip":
                return "skipped"
            if existing == "replace":
                if current == messages:
                    return "unchanged"
                await place.replace(key, messages, version)
                return "replaced"
            if not messages or current[len(current) - len(messages) :] == messages:
                return "unchanged"
            await place.append(key, messages, version)
            return "appended"
        except VersionMismatch:
            continue  # written meanwhile: read it again and decide again
        except PlaceError as exc:  # the service refused this conversation (too large, a bad key): nothing written
            raise BadLine(number, str(exc)) from None
    raise BadLine(number, f"conversation {key!r} kept changing while it was imported ({ATTEMPTS} attempts)")
