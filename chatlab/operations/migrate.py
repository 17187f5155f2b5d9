"""``chatlab migrate --from URL --to URL``: copy every conversation to another store, resumably, verified.

Each conversation is copied whole with its own version and timestamps
(:meth:`~chatlab.stores.ChatHistoryStore.restore`), so a client's ``ETag`` stays valid and
retention counts from the same last write. The copy goes in batches (one transaction each in
the SQL stores). Interrupted, it resumes: a conversation already in the target at its source's
version is done, so it is neither copied twice nor lost. At the end the source and the target
are listed again and every conversation's count and version compared.

Stop the writers first (or point them at the target): a conversation written in the source
during the copy is reported by the verification, and running the migration again copies it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from ..stores import ChatHistoryStore, open_store
from ..stores.base import ABSENT, ConversationRecord, ConversationSummary

BATCH = 200


class MigrationConflict(ValueError):
    """The target holds conversations of the same keys that the migration did not write."""


@dataclass
class MigrationReport:
    """How many conversations there were, were copied now, were there already; which differ at the end."""

    total: int = 0
    copied: int = 0
    already: int = 0
    mismatches: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        verified = "all verified" if not self.mismatches else f"{len(self.mismatches)} differ"
        noun = "conversation" if self.total == 1 else "conversations"
        return f"{self.total} {noun}: {self.copied} copied, {self.already} already there; {verified}"


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
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> MigrationReport:
    """Copy every conversation of ``source_url`` into ``target_url``; ``progress(done, total)`` after each batch."""
    _check_urls(source_url, target_url)
    source, target = open_store(source_url), open_store(target_url)
    try:
        return await _migrate(source, target, batch, overwrite, progress or (lambda done, total: None))
    finally:
        await source.close()
        await target.close()


async def _migrate(
    source: ChatHistoryStore,
    target: ChatHistoryStore,
    batch: int,
    overwrite: bool,
    progress: Callable[[int, int], None],
) -> MigrationReport:
    wanted = await source.summaries()
    there = {s.conversation_key: s for s in await target.summaries()}
    todo = [s for s in wanted if not _same(s, there.get(s.conversation_key))]
    conflicts = [s.conversation_key for s in todo if s.conversation_key in there]
    if conflicts and not overwrite:
        raise MigrationConflict(
            f"the target already holds {len(conflicts)} of these conversations at other versions "
            f"({', '.join(map(repr, conflicts[:5]))}{', ...' if len(conflicts) > 5 else ''}); "
            "pass --overwrite to replace them with the source's"
        )
    report = MigrationReport(total=len(wanted), already=len(wanted) - len(todo))
    progress(report.already, report.total)
    for start in range(0, len(todo), batch):
        chunk = todo[start : start + batch]
        records = await asyncio.gather(*(_record(source, s, there) for s in chunk))
        await target.restore([r for r in records if r is not None])
        report.copied += len(chunk)
        progress(report.already + report.copied, report.total)
    report.mismatches = await verify(source, target)
    return report


def _same(source: ConversationSummary, target: ConversationSummary | None) -> bool:
    return target is not None and (target.message_count, target.version) == (source.message_count, source.version)


async def _record(
    source: ChatHistoryStore, summary: ConversationSummary, there: dict[str, ConversationSummary]
) -> ConversationRecord | None:
    """The whole conversation as the source holds it now (``None`` if deleted since it was listed)."""
    conversation = await source.read(summary.conversation_key)
    if conversation.version == ABSENT:
        return None
    now = source.clock()
    existing = there.get(summary.conversation_key)
    return ConversationRecord(
        summary.conversation_key,
        conversation.messages,
        conversation.version,
        summary.created_at if summary.created_at is not None else now,
        summary.updated_at if summary.updated_at is not None else now,
        existing.version or ABSENT if existing is not None else ABSENT,
    )


async def verify(source: ChatHistoryStore, target: ChatHistoryStore) -> list[str]:
    """The keys whose count or version differ between the two stores (missing ones included)."""
    there = {s.conversation_key: s for s in await target.summaries()}
    return [s.conversation_key for s in await source.summaries() if not _same(s, there.get(s.conversation_key))]


def terminal_progress() -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A progress bar on stderr when it is a terminal (rich); nothing otherwise. Returns (update, stop)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn("migrating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not sys.stderr.isatty(),
    )
    task = bar.add_task("migrate", total=None)
    bar.start()

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop
