"""``chatlab migrate --from URL --to URL``: copy every conversation to another store, resumably, keeping every write.

The protocol (check, copy, catch up, verify) and what it guarantees are in docs/operations.md.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from itertools import compress
from typing import TypeAlias

from ..stores import ChatHistoryStore, open_store
from ..stores.base import (
    ABSENT,
    Conversation,
    ConversationRecord,
    ConversationSummary,
    Metadata,
    MetadataChanged,
    VersionMismatch,
    summary_of,
)
from .metadata_merge import change_to, merged, metadata_of
from .places import PAGE, walk

Summary: TypeAlias = ConversationSummary | None
BATCH = 200
ATTEMPTS = 5
#: Conversations read at once while settling or checking them one by one.
_AT_ONCE = 32


class MigrationConflict(ValueError):
    """The target holds conversations written in both places; nothing was written."""


class MigrationStopped(RuntimeError):
    """The migration stopped part-way (a store failed): what was done, and ``report`` so far."""

    def __init__(self, message: str, report: MigrationReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class MigrationReport:
    """What a migration did; ``diverged``: written in both places and left as they were (``merge=False``);
    ``mismatches``: those that still differ at the end."""

    total: int = 0
    copied: int = 0
    already: int = 0
    settled: Counter[str] = field(default_factory=Counter)
    diverged: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        verified = "all verified" if not self.mismatches else f"{len(self.mismatches)} differ"
        noun = "conversation" if self.total == 1 else "conversations"
        settled = ", ".join(f"{count} {SETTLED[outcome]}" for outcome, count in sorted(self.settled.items()) if count)
        changed = f"; changed during the copy or before it: {settled}" if settled else ""
        return f"{self.total} {noun}: {self.copied} copied, {self.already} already there{changed}; {verified}"


#: Each outcome of settling one conversation, in words, from the least telling to the most (a conversation
#: settled in several passes is reported by its most telling outcome).
SETTLED = {
    "already": "already the same",
    "busy": "kept changing and were left (run again)",
    "diverged": "written in both places and left as they were (run again without --no-merge)",
    "gone": "deleted in the source meanwhile (the target's left as it is)",
    "metadata": "given the source's title and tags (changed after they were copied)",
    "copied": "copied in the catch-up",
    "kept": "kept as the target had them (it holds the source's messages and newer ones)",
    "caught up": "brought up to the source's newer messages",
    "merged": "merged (the source's messages, then the target's own)",
}
_RANK = list(SETTLED)


async def migrate(
    source_url: str,
    target_url: str,
    *,
    batch: int = BATCH,
    merge: bool = True,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
    page: int = PAGE,
) -> MigrationReport:
    """Copy every conversation of ``source_url`` into ``target_url``; ``progress(done, total)`` after each batch.
    ``merge`` (``overwrite``, its old name): a conversation written in both places becomes the source's messages
    followed by the target's own; without it, one is refused at the start (:class:`MigrationConflict`) and left
    as it is when it appears during the copy."""
    for url in (source_url, target_url):
        if url.strip() in ("", "memory", "memory://"):
            raise ValueError(
                "memory:// holds only one process's conversations: migrate between sqlite, "
                "postgresql and redis stores (export a running service with `chatlab export --url`)"
            )
    if source_url.strip() == target_url.strip():
        raise ValueError(
            "--from and --to name the same store: give --to the store to copy into (another SQLite file, "
            "PostgreSQL database or schema, or Redis database or prefix)"
        )
    if batch < 1:
        raise ValueError(f"--batch must be 1 or more, not {batch}")
    source, target = open_store(source_url), open_store(target_url)
    try:
        return await Migration(source, target, batch, merge or overwrite, progress or Migration.progress, page).run()
    finally:
        await source.close()
        await target.close()


@dataclass
class Migration:
    """One run of the protocol between two open stores."""

    source: ChatHistoryStore
    target: ChatHistoryStore
    batch: int = BATCH
    merge: bool = True
    progress: Callable[[int, int], None] = lambda done, total: None
    page: int = PAGE
    report: MigrationReport = field(default_factory=MigrationReport, init=False)
    #: What settling did to each conversation that needed it (the most telling outcome of its passes).
    outcomes: dict[str, str] = field(default_factory=dict, init=False)
    #: Each target conversation's metadata as this run last wrote it (:mod:`.metadata_merge`).
    bases: dict[str, Metadata] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.page < 1:
            raise ValueError(f"page must be 1 or more, not {self.page}")

    async def run(self) -> MigrationReport:
        """Check, copy, catch up and verify (docs/operations.md); the report, or :class:`MigrationStopped`."""
        try:
            await self._copy()
            await _each_differing(self.source, self.target, self.page, self._settle_all, self.bases)  # the catch-up
            self.report.mismatches = await verify(self.source, self.target, self.page, self.bases)
        except (MigrationConflict, MigrationStopped):
            raise
        except Exception as exc:  # a store failed: say what was done, keep what was copied
            done, total = self.report.copied + self.report.already, self.report.total
            so_far = f"after {done} of {total} conversations were in the target, each whole"
            so_far = so_far if total else "before anything was copied"
            raise MigrationStopped(
                f"migrate stopped ({type(exc).__name__}: {exc}) {so_far}; nothing the target held was discarded; "
                "run the same command again to finish",
                self.report,
            ) from exc
        return self.report

    async def _copy(self) -> None:
        """The check (a pass that only lists), then what the target lacks copied a batch at a time."""
        report = self.report
        total, absent, differing = 0, 0, list[str]()
        async with aclosing(paired(self.source, self.target, self.page)) as pairs:
            async for mine, there in pairs:
                total += 1
                if there is None:
                    absent += 1
                    continue
                if not _same(mine, there, self.bases):
                    differing.append(mine.conversation_key)
        report.total, report.already = total, total - absent - len(differing)
        if differing and not self.merge:
            both: list[str] = []
            for start in range(0, len(differing), _AT_ONCE):
                keys = differing[start : start + _AT_ONCE]
                both += compress(keys, await asyncio.gather(*map(self._both, keys)))
            if both:
                named = ", ".join(map(repr, both[:5])) + (", ..." if len(both) > 5 else "")
                raise MigrationConflict(
                    f"the target already holds {len(both)} of these conversations with messages the source lacks, "
                    f"and lacks some the source holds ({named}): "
                    "nothing was copied; if clients write to the target, run again without --no-merge (each becomes "
                    "the source's messages followed by the target's own, nothing is discarded)"
                )
        self.progress(report.already, report.total)
        chunk: list[ConversationSummary] = []
        async with aclosing(paired(self.source, self.target, self.page)) as pairs:
            async for mine, there in pairs:
                if there is None:
                    chunk.append(mine)
                if len(chunk) == self.batch:
                    await self._copy_batch(chunk)
                    chunk = []
        if chunk:
            await self._copy_batch(chunk)
        await self._settle_all(differing)

    async def _copy_batch(self, chunk: list[ConversationSummary]) -> None:
        report = self.report
        read = await asyncio.gather(*(self.source.read(s.conversation_key) for s in chunk))
        records = [  # each whole as the source holds it now; none for one deleted since it was listed
            self._whole(summary.conversation_key, held, summary)
            for summary, held in zip(chunk, read, strict=True)
            if held.version != ABSENT
        ]
        try:
            await self.target.restore(records)
            report.copied += len(chunk)
            for record in records:
                self.bases[record.conversation_key] = Metadata(record.title, record.tags)
        except (VersionMismatch, MetadataChanged):  # some were written in the target meanwhile: one at a time
            await self._settle_all([s.conversation_key for s in chunk], into_copied=True)
        report.total = max(report.total, report.already + report.copied)  # some created since the check
        self.progress(report.already + report.copied, report.total)

    async def _settle_all(self, keys: Sequence[str], *, into_copied: bool = False) -> None:
        for start in range(0, len(keys), _AT_ONCE):  # each chunk counted as soon as it is settled
            chunk = keys[start : start + _AT_ONCE]
            for key, outcome in zip(chunk, await asyncio.gather(*map(self._settle, chunk)), strict=True):
                if into_copied and outcome in ("copied", "already"):
                    self.report.copied += 1
                    continue
                before = self.outcomes.get(key)
                if before is None or _RANK.index(outcome) > _RANK.index(before) or before in ("diverged", "busy"):
                    self.outcomes[key] = outcome
        self.report.settled = Counter(o for o in self.outcomes.values() if o != "already")
        self.report.diverged = sorted(k for k, o in self.outcomes.items() if o == "diverged")

    async def _both(self, key: str) -> bool:
        """Whether neither place holds all the other's messages."""
        source, target = await self.source.read(key), await self.target.read(key)
        return not (_starts(source.messages, target.messages) or _starts(target.messages, source.messages))

    async def _settle(self, key: str) -> str:
        """Bring one conversation of the target up to the source's, discarding none of the target's messages and
        undoing none of its clients' titles and tags."""
        for _ in range(ATTEMPTS):
            source = await self.source.read(key)
            if source.version == ABSENT:
                return "gone"
            target = await self.target.read(key)
            mine = await summary_of(self.source, key)
            there = await summary_of(self.target, key) if target.version != ABSENT else None
            if mine is None:
                return "gone"
            try:
                return await self._settle_read(key, source, target, mine, there)
            except (VersionMismatch, MetadataChanged):
                continue  # written meanwhile: read both again and decide again
        return "busy"

    async def _settle_read(
        self, key: str, source: Conversation, target: Conversation, mine: ConversationSummary, there: Summary
    ) -> str:
        """One attempt of :meth:`_settle` on what it read; each write guarded by the target's version and metadata."""
        if there is None or target.version == ABSENT:
            await self._restore(key, source, ABSENT, mine, None)
            return "copied"
        if target.version == source.version and target.messages == source.messages:
            return "metadata" if await self._retag(key, mine, there) else "already"
        if _starts(source.messages, target.messages):  # the target holds the start: catch up
            await self._restore(key, source, target.version, mine, there)
            return "caught up"
        if _starts(target.messages, source.messages):  # the target holds all of it and newer writes
            await self._retag(key, mine, there)
            return "kept"
        if not self.merge:
            return "diverged"
        common = _common(source.messages, target.messages)
        merged_messages = [*source.messages, *target.messages[common:]]
        written = await self.target.replace(key, merged_messages, if_match=[target.version])
        retagged = await summary_of(self.target, key)
        if retagged is not None and retagged.version == written.version:
            await self._retag(key, mine, retagged)
        return "merged"

    async def _restore(
        self, key: str, held: Conversation, expected: str, mine: ConversationSummary, there: Summary
    ) -> None:
        """Write ``held`` whole over the target's version ``expected`` and its metadata as read (``there``)."""
        wanted = merged(mine, there, self.bases.get(key))
        now = self.source.clock()
        created = mine.created_at if mine.created_at is not None else now
        updated = mine.updated_at if mine.updated_at is not None else now
        record = ConversationRecord(
            key,
            held.messages,
            held.version,
            created,
            updated,
            expected,
            wanted.title,
            wanted.tags,
            expected_metadata=metadata_of(there),
        )
        await self.target.restore([record])
        self.bases[key] = wanted

    async def _retag(self, key: str, mine: ConversationSummary, there: ConversationSummary) -> bool:
        """Give the target the merged title and tags, over the metadata it was read with; whether it changed any."""
        wanted = merged(mine, there, self.bases.get(key))
        change = change_to(wanted, there)
        if change is None:
            return False
        await self.target.set_metadata(key, change, expected=metadata_of(there))
        self.bases[key] = wanted
        return True

    def _whole(self, key: str, held: Conversation, mine: ConversationSummary) -> ConversationRecord:
        """``held`` as a record of the source, with its times, title and tags, for a target that lacks it."""
        now = self.source.clock()
        created = mine.created_at if mine.created_at is not None else now
        updated = mine.updated_at if mine.updated_at is not None else now
        return ConversationRecord(
            key, held.messages, held.version, created, updated, ABSENT, mine.title, dict(mine.tags)
        )


async def paired(
    source: ChatHistoryStore, target: ChatHistoryStore, page: int = PAGE
) -> AsyncGenerator[tuple[ConversationSummary, ConversationSummary | None], None]:
    """Each conversation of ``source`` with the target's of the same key (``None``: none), both walked in key order."""
    async with aclosing(walk(target, page=page)) as theirs:
        there = await anext(theirs, None)
        async for mine in walk(source, page=page):
            key = mine.conversation_key
            while there is not None and there.conversation_key < key:
                there = await anext(theirs, None)
            yield mine, (there if there is not None and there.conversation_key == key else None)


async def _each_differing(
    source: ChatHistoryStore,
    target: ChatHistoryStore,
    page: int,
    handle: Callable[[list[str]], Awaitable[None]],
    bases: Mapping[str, Metadata] | None = None,
) -> None:
    """``handle`` the keys the target lacks or holds otherwise, :data:`_AT_ONCE` at a time."""
    keys: list[str] = []
    async with aclosing(paired(source, target, page)) as pairs:
        async for mine, there in pairs:
            if there is None or not _same(mine, there, bases or {}):
                keys.append(mine.conversation_key)
            if len(keys) == _AT_ONCE:
                await handle(keys)
                keys = []
    await handle(keys)


def _same(source: ConversationSummary, target: ConversationSummary, bases: Mapping[str, Metadata]) -> bool:
    """Whether the target holds the source's messages at its version, and the metadata the merge wants."""
    same = (target.message_count, target.version) == (source.message_count, source.version)
    return same and merged(source, target, bases.get(source.conversation_key)) == metadata_of(target)


def _starts(whole: Sequence[bytes], start: Sequence[bytes]) -> bool:
    return len(start) <= len(whole) and list(whole[: len(start)]) == list(start)


def _common(one: Sequence[bytes], other: Sequence[bytes]) -> int:
    """How many messages the two start with in common."""
    pairs = zip(one, other, strict=False)
    return next((n for n, (a, b) in enumerate(pairs) if a != b), min(len(one), len(other)))


async def verify(
    source: ChatHistoryStore, target: ChatHistoryStore, page: int = PAGE, bases: Mapping[str, Metadata] | None = None
) -> list[str]:
    """The source's keys whose messages do not start the target's (missing ones included), or whose target lacks
    the title and tags the merge wants (:mod:`.metadata_merge`; ``bases``: a migration's, else the target as it is)."""
    mismatches: list[str] = []
    known = bases or {}

    async def lacks(key: str) -> bool:
        held, copy = await source.read(key), await target.read(key)
        if held.version == ABSENT:
            return False
        if not _starts(copy.messages, held.messages):
            return True
        mine, there = await summary_of(source, key), await summary_of(target, key)
        if mine is None:
            return False
        return there is None or merged(mine, there, known.get(key)) != metadata_of(there)

    async def check(keys: list[str]) -> None:  # at most _AT_ONCE keys
        mismatches.extend(compress(keys, await asyncio.gather(*map(lacks, keys))))

    await _each_differing(source, target, page, check, known)
    return mismatches
