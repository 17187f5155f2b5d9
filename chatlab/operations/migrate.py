"""``chatlab migrate --from URL --to URL``: copy every conversation to another store, resumably, keeping every write.

The protocol (docs/operations.md says what it guarantees):

1. **Check.** Both stores are listed. A target conversation that holds messages the source lacks *and*
   lacks some the source holds (written in both places) is never overwritten; with ``merge=False``
   (``--no-merge``) the migration refuses to start when there is one, and nothing is written.
2. **Copy.** Each conversation absent from the target is copied whole with its own version and
   timestamps (:meth:`~chatlab.stores.ChatHistoryStore.restore`), so a client's ``ETag`` stays valid and
   retention counts from the same last write; in batches (one transaction each in the SQL stores), each
   write guarded by the version the target was at (absent). A batch that meets a conversation written
   in the target meanwhile is settled one conversation at a time (step 3's rule).
3. **Catch up.** Both stores are listed again, and every conversation whose count or version differs
   is settled on its own, each write guarded by the target's version (``if_match``; on a mismatch it is
   read again and decided again): absent from the target, it is copied; the target holds the start of
   the source's messages (the source was written during the copy), it is brought up to the source's;
   the target holds all the source's messages and more (written in the target after its copy), it is
   kept as it is; written in both, it becomes the source's messages followed by those only the target
   holds (a new version), or with ``merge=False`` is left as it is and reported. Nothing the target
   holds is ever discarded.
4. **Verify.** Both stores are listed a last time: every source conversation's messages must be the
   start of (or all of) the target's. Those that are not are reported; the exit status is then 1.

Interrupted (Ctrl+C, a crash, ``kill -9``), the same command run again finishes the job: conversations
already in the target at their source version are done. Writes to the source after the catch-up are
not copied (the verification reports them): stop the source's writers first, or run it again.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..stores import ChatHistoryStore, open_store
from ..stores.base import ABSENT, Conversation, ConversationRecord, ConversationSummary, VersionMismatch

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
    """What a migration did: how many conversations there were, copied now, there already, settled how,
    and which still differ at the end (``mismatches``)."""

    total: int = 0
    copied: int = 0
    already: int = 0
    #: How the conversations that differed (before or during the copy) were settled, by outcome.
    settled: Counter[str] = field(default_factory=Counter)
    #: Conversations written in both places and left as they were (``merge=False``).
    diverged: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        verified = "all verified" if not self.mismatches else f"{len(self.mismatches)} differ"
        noun = "conversation" if self.total == 1 else "conversations"
        settled = ", ".join(f"{count} {SETTLED[outcome]}" for outcome, count in sorted(self.settled.items()) if count)
        changed = f"; changed during the copy or before it: {settled}" if settled else ""
        return f"{self.total} {noun}: {self.copied} copied, {self.already} already there{changed}; {verified}"


#: Each outcome of settling one conversation, in words.
SETTLED = {
    "copied": "copied in the catch-up",
    "caught up": "brought up to the source's newer messages",
    "kept": "kept as the target had them (it holds the source's messages and newer ones)",
    "merged": "merged (the source's messages, then the target's own)",
    "diverged": "written in both places and left as they were (run again without --no-merge)",
    "gone": "deleted in the source meanwhile (the target's left as it is)",
    "busy": "kept changing and were left (run again)",
    "already": "already the same",
}


_RANK = {"already": 0, "busy": 1, "diverged": 1, "gone": 2, "copied": 3, "kept": 4, "caught up": 5, "merged": 6}


def _check_urls(source: str, target: str) -> None:
    for url in (source, target):
        if url.strip() in ("", "memory", "memory://"):
            raise ValueError(
                "memory:// holds only one process's conversations: migrate between sqlite, "
                "postgresql and redis stores (export a running service with `chatlab export --url`)"
            )
    if source.strip() == target.strip():
        raise ValueError(
            "--from and --to name the same store: give --to the store to copy into (another SQLite file, "
            "PostgreSQL database or schema, or Redis database or prefix)"
        )


async def migrate(
    source_url: str,
    target_url: str,
    *,
    batch: int = BATCH,
    merge: bool = True,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> MigrationReport:
    """Copy every conversation of ``source_url`` into ``target_url``; ``progress(done, total)`` after each batch.

    ``merge``: a conversation written in both places becomes the source's messages followed by the target's
    own; with ``merge=False`` such a conversation is refused at the start and left as it is when it appears
    during the copy. ``overwrite=True``, which once replaced such conversations, now merges them too.
    Raises :class:`MigrationConflict` (nothing written) or :class:`MigrationStopped` (a store failed
    part-way; running it again finishes the job).
    """
    _check_urls(source_url, target_url)
    if batch < 1:
        raise ValueError(f"--batch must be 1 or more, not {batch}")
    source, target = open_store(source_url), open_store(target_url)
    try:
        return await Migration(source, target, batch, merge or overwrite, progress).run()
    finally:
        await source.close()
        await target.close()


class Migration:
    """One run of the protocol between two open stores."""

    def __init__(
        self,
        source: ChatHistoryStore,
        target: ChatHistoryStore,
        batch: int = BATCH,
        merge: bool = True,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.source, self.target, self.batch, self.merge = source, target, batch, merge
        self.progress = progress or (lambda done, total: None)
        self.report = MigrationReport()
        #: What settling did to each conversation that needed it (the most telling outcome of its passes).
        self.outcomes: dict[str, str] = {}

    async def run(self) -> MigrationReport:
        try:
            await self._copy()
            await self._catch_up()
            self.report.mismatches = await verify(self.source, self.target)
        except (MigrationConflict, MigrationStopped):
            raise
        except Exception as exc:  # a store failed: say what was done, keep what was copied
            done = self.report.copied + self.report.already
            so_far = (
                f"after {done} of {self.report.total} conversations were in the target, each whole"
                if self.report.total
                else "before anything was copied"
            )
            raise MigrationStopped(
                f"migrate stopped ({type(exc).__name__}: {exc}) {so_far}; nothing the target held was discarded; "
                "run the same command again to finish",
                self.report,
            ) from exc
        return self.report

    async def _copy(self) -> None:
        report = self.report
        wanted = await self.source.summaries()
        there = {s.conversation_key: s for s in await self.target.summaries()}
        absent = [s for s in wanted if s.conversation_key not in there]
        differing = [s.conversation_key for s in wanted if s.conversation_key in there and not _same(s, there)]
        report.total, report.already = len(wanted), len(wanted) - len(absent) - len(differing)
        if differing and not self.merge:
            both = [key for key, state in zip(differing, await self._states(differing), strict=True) if state]
            if both:
                named = ", ".join(map(repr, both[:5])) + (", ..." if len(both) > 5 else "")
                raise MigrationConflict(
                    f"the target already holds {len(both)} of these conversations with messages the source lacks, "
                    f"and lacks some the source holds ({named}): "
                    "nothing was copied; if clients write to the target, run again without --no-merge (each becomes "
                    "the source's messages followed by the target's own, nothing is discarded)"
                )
        self.progress(report.already, report.total)
        for start in range(0, len(absent), self.batch):
            chunk = absent[start : start + self.batch]
            records = await asyncio.gather(*(self._record(s) for s in chunk))
            try:
                await self.target.restore([r for r in records if r is not None])
                report.copied += len(chunk)
            except VersionMismatch:  # some were written in the target meanwhile: one at a time, each guarded
                await self._settle_all([s.conversation_key for s in chunk], into_copied=True)
            self.progress(report.already + report.copied, report.total)
        await self._settle_all(differing, into_copied=False)

    async def _catch_up(self) -> None:
        """The final pass: every conversation that changed since it was listed is settled on its own."""
        wanted = await self.source.summaries()
        there = {s.conversation_key: s for s in await self.target.summaries()}
        await self._settle_all([s.conversation_key for s in wanted if not _same(s, there)], into_copied=False)

    async def _settle_all(self, keys: Sequence[str], *, into_copied: bool) -> None:
        for start in range(0, len(keys), _AT_ONCE):
            chunk = keys[start : start + _AT_ONCE]
            for key, outcome in zip(chunk, await asyncio.gather(*(self._settle(k) for k in chunk)), strict=True):
                if into_copied and outcome in ("copied", "already"):
                    self.report.copied += 1
                    continue
                before = self.outcomes.get(key)
                if before is None or _RANK[outcome] > _RANK[before] or before in ("diverged", "busy"):
                    self.outcomes[key] = outcome
        report = self.report
        report.settled = Counter(o for o in self.outcomes.values() if o != "already")
        report.diverged = sorted(k for k, o in self.outcomes.items() if o == "diverged")

    async def _states(self, keys: Sequence[str]) -> list[bool]:
        """For each key: whether it was written in both places (neither holds all the other's messages)."""

        async def both(key: str) -> bool:
            source, target = await self.source.read(key), await self.target.read(key)
            return not (_starts(source.messages, target.messages) or _starts(target.messages, source.messages))

        states: list[bool] = []
        for start in range(0, len(keys), _AT_ONCE):
            states += await asyncio.gather(*(both(k) for k in keys[start : start + _AT_ONCE]))
        return states

    async def _settle(self, key: str) -> str:
        """Bring one conversation of the target up to the source's without discarding any of the target's."""
        for _ in range(ATTEMPTS):
            source = await self.source.read(key)
            if source.version == ABSENT:
                return "gone"
            target = await self.target.read(key)
            try:
                if target.version == ABSENT:
                    await self.target.restore([await self._whole(key, source, ABSENT)])
                    return "copied"
                if target.version == source.version and target.messages == source.messages:
                    return "already"
                if _starts(source.messages, target.messages):  # the target holds the start: catch up
                    await self.target.restore([await self._whole(key, source, target.version)])
                    return "caught up"
                if _starts(target.messages, source.messages):  # the target holds all of it and newer writes
                    return "kept"
                if not self.merge:
                    return "diverged"
                common = _common(source.messages, target.messages)
                merged = [*source.messages, *target.messages[common:]]
                await self.target.replace(key, merged, if_match=[target.version])
                return "merged"
            except VersionMismatch:
                continue  # written meanwhile: read both again and decide again
        return "busy"

    async def _whole(self, key: str, conversation: Conversation, expected: str) -> ConversationRecord:
        """``conversation`` as a record of the source, with its timestamps, to be written over ``expected``."""
        now = self.source.clock()
        summary = next((s for s in await self.source.summaries(key) if s.conversation_key == key), None)
        created = summary.created_at if summary is not None and summary.created_at is not None else now
        updated = summary.updated_at if summary is not None and summary.updated_at is not None else now
        return ConversationRecord(key, conversation.messages, conversation.version, created, updated, expected)

    async def _record(self, summary: ConversationSummary) -> ConversationRecord | None:
        """The whole conversation as the source holds it now (``None`` if deleted since it was listed)."""
        conversation = await self.source.read(summary.conversation_key)
        if conversation.version == ABSENT:
            return None
        now = self.source.clock()
        return ConversationRecord(
            summary.conversation_key,
            conversation.messages,
            conversation.version,
            summary.created_at if summary.created_at is not None else now,
            summary.updated_at if summary.updated_at is not None else now,
            ABSENT,
        )


def _same(source: ConversationSummary, there: dict[str, ConversationSummary]) -> bool:
    target = there.get(source.conversation_key)
    return target is not None and (target.message_count, target.version) == (source.message_count, source.version)


def _starts(whole: Sequence[bytes], start: Sequence[bytes]) -> bool:
    """Whether ``whole`` starts with ``start``."""
    return len(start) <= len(whole) and list(whole[: len(start)]) == list(start)


def _common(one: Sequence[bytes], other: Sequence[bytes]) -> int:
    """How many messages the two start with in common."""
    n = 0
    while n < min(len(one), len(other)) and one[n] == other[n]:
        n += 1
    return n


async def verify(source: ChatHistoryStore, target: ChatHistoryStore) -> list[str]:
    """The source's keys whose messages are not the start of (or all of) the target's (missing ones included)."""
    there = {s.conversation_key: s for s in await target.summaries()}
    differing = [s.conversation_key for s in await source.summaries() if not _same(s, there)]

    async def lacks(key: str) -> bool:
        held, copy = await source.read(key), await target.read(key)
        return held.version != ABSENT and not _starts(copy.messages, held.messages)

    mismatches: list[str] = []
    for start in range(0, len(differing), _AT_ONCE):
        chunk = differing[start : start + _AT_ONCE]
        mismatches += [k for k, bad in zip(chunk, await asyncio.gather(*(lacks(k) for k in chunk)), strict=True) if bad]
    return mismatches


def terminal_progress(every: float = 2.0) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """Progress on stderr: a bar (rich) on a terminal; otherwise a line at most every ``every`` seconds,
    so a log shows how far a run got even when it is killed. Returns (update, stop)."""
    if not sys.stderr.isatty():
        last = [0.0]

        def line(done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] >= every or done == total:
                last[0] = now
                print(f"migrate: {done} of {total} conversations in the target", file=sys.stderr, flush=True)

        return line, lambda: None

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn("migrating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=Console(stderr=True)
    )
    task = bar.add_task("migrate", total=None)
    bar.start()

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop
