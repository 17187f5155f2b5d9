"""``chatlab import``: conversations from JSON Lines into a store or a service, safe to run again.

What each ``existing`` choice does is in docs/operations.md. Each conversation is one write guarded by the version
read just before it, then its metadata: one written meanwhile is read and decided again, never overwritten blind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, TypeAlias

from ..service.settings import ServiceSettings
from ..stores.base import ABSENT, VersionMismatch
from ..stores.metadata import MetadataChange, MetadataError
from .lines import BadLine, Line, numbered_lines, parse_conversation
from .places import Place, PlaceError, PlaceUnavailable

EXISTING_CHOICES = ("skip", "replace", "append")
WRITTEN = ("created", "replaced", "appended", "metadata")
ATTEMPTS = 5
SAID = {"metadata": "given the file's title and tags"}  # outcomes as the report says them


def default_line_limit() -> int:
    """The service's request body limit (``CHATLAB_MAX_BODY_BYTES``)."""
    return ServiceSettings().max_body_bytes


@dataclass
class ImportReport:
    """What an import did; ``stopped``: why it stopped before the end, at line ``stopped_at``; ``checked_only``:
    ``strict`` found bad lines, so nothing was written."""

    outcomes: Counter[str] = field(default_factory=Counter)
    bad_lines: list[BadLine] = field(default_factory=list)
    stopped: str | None = None
    stopped_at: int | None = None
    checked_only: bool = False

    def __str__(self) -> str:
        def counted(written: bool) -> tuple[int, str]:
            counts = [(o, n) for o, n in sorted(self.outcomes.items()) if (o in WRITTEN) == written]
            parts = ", ".join(f"{n} {SAID.get(o, o)}" for o, n in counts if n)
            return sum(n for _, n in counts), f" ({parts})" if parts else ""

        (written, done), (left, kept) = counted(True), counted(False)
        numbers = ", ".join(str(bad.line) for bad in self.bad_lines[:20])
        numbers += ", ..." if len(self.bad_lines) > 20 else ""
        skipped = f"{len(self.bad_lines)} bad lines skipped" + (f" (line {numbers})" if self.bad_lines else "")
        return f"{written} conversations written{done}, {left} left as they were{kept}, {skipped}"


async def import_conversations(
    place: Place,
    lines: BinaryIO | Iterable[bytes],
    existing: str = "skip",
    *,
    limit: int | None = None,
    strict: bool = False,
) -> ImportReport:
    """Import each line of ``lines`` (a binary file, or lines as bytes) into ``place``; a line over ``limit`` is
    a bad one. ``strict``: check every line first (``lines`` a seekable file or a list), write nothing if one is bad."""
    if existing not in EXISTING_CHOICES:
        raise ValueError(f"existing must be one of {', '.join(EXISTING_CHOICES)}, not {existing!r}")
    limit = default_line_limit() if limit is None else limit
    report = ImportReport()
    if strict:
        if not (isinstance(lines, Sequence) or (hasattr(lines, "seekable") and lines.seekable())):
            raise ValueError("--strict reads the file twice (check, then write): give a file, not standard input")
        for number, raw in numbered_lines(lines, limit):
            _checked(place, number, raw, limit, report)
        if report.bad_lines:
            report.checked_only = True
            return report
        if hasattr(lines, "seek"):
            lines.seek(0)
    for number, raw in numbered_lines(lines, limit):
        line = _checked(place, number, raw, limit, report)
        if line is None:
            continue
        try:
            report.outcomes[await _import_one(place, line, existing)] += 1
        except PlaceError as exc:  # this conversation refused: nothing of it written, the next may go through
            report.bad_lines.append(BadLine(number, str(exc)))
            if strict:
                report.stopped, report.stopped_at = str(exc), number
                return report
        except PlaceUnavailable as exc:
            report.stopped, report.stopped_at = str(exc), number
            return report
    return report


def _checked(place: Place, number: int, raw: bytes | None, limit: int, report: ImportReport) -> Line | None:
    """A good line; ``None`` for a blank one or a bad one (put into ``report``)."""
    if raw is None:
        reason = f"longer than {limit} bytes, the service's request limit (not read; --max-line-bytes raises it)"
        report.bad_lines.append(BadLine(number, reason))
        return None
    if not raw.strip():
        return None
    try:
        line = parse_conversation(raw, number)
        place.check_key(line.conversation_key)
    except (BadLine, PlaceError) as exc:
        report.bad_lines.append(exc if isinstance(exc, BadLine) else BadLine(number, str(exc)))
        return None
    return line


async def _import_one(place: Place, line: Line, existing: str) -> str:
    """Write one conversation as ``existing`` says (the messages, then the metadata if it changes); its outcome."""
    key, messages = line.conversation_key, line.messages
    for _ in range(ATTEMPTS):
        current, version = await place.read(key)
        try:
            if version == ABSENT:
                await place.write(key, messages, ABSENT)
                if line.has_metadata:
                    await place.set_metadata(key, MetadataChange.setting(line.title, line.tags))
                return "created"
            if existing == "skip":
                found = await place.summary(key) if line.has_metadata and current == messages else None
                if found is not None and found.title is None and not found.tags:  # the same, bare: give it these
                    await place.set_metadata(key, MetadataChange.setting(line.title, line.tags))
                    return "metadata"
                return "skipped"
            summary, replacing = await place.summary(key), existing == "replace"
            had = (summary.title, dict(summary.tags)) if summary is not None else (None, {})
            change = _replacing(had, line) if replacing else _merging(had, line)
            held = current == messages if replacing else holds_run(current, messages)
            if not held:
                await place.write(key, messages, version, append=not replacing)
            if change is not None:
                await place.set_metadata(key, change)
            if not held:
                return "replaced" if replacing else "appended"
            return "metadata" if change is not None else "unchanged"
        except VersionMismatch:
            continue  # written meanwhile: read it again and decide again
    raise PlaceError(f"conversation {key!r} kept changing while it was imported ({ATTEMPTS} attempts)")


Metadata: TypeAlias = tuple[str | None, dict[str, str]]


def _replacing(had: Metadata, line: Line) -> MetadataChange | None:
    """The change that makes the conversation's title and tags the line's (``None``: they already are)."""
    if had == (line.title, dict(line.tags)):
        return None
    gone = {name: None for name in had[1] if name not in line.tags}
    return MetadataChange(line.title, True, {**gone, **line.tags})


def _merging(had: Metadata, line: Line) -> MetadataChange | None:
    """The change that sets the line's title (if any) and tags over the conversation's (``None``: it has them);
    :class:`PlaceError` before anything is written if they would be too many."""
    if not line.has_metadata:
        return None
    title, tags = had
    change = MetadataChange.setting(line.title, line.tags)
    try:
        if change.applied(title, tags) == (title, tags):
            return None
    except MetadataError as exc:
        raise PlaceError(f"its tags with the conversation's own: {exc}") from None
    return change


def holds_run(current: Sequence[bytes], messages: Sequence[bytes]) -> bool:
    """Whether ``current`` holds ``messages`` one after another somewhere (an empty run: always)."""
    size = len(messages)
    return not messages or any(
        current[i] == messages[0] and list(current[i : i + size]) == list(messages)
        for i in range(len(current) - size + 1)
    )
