"""What one run carries from the provider's load hook to its save hook, kept with the run, never per conversation.

Two runs on one conversation key through one provider (a fan-out's agents sharing it, a user's double submit) overlap,
so nothing a run needs between ``before_run`` and ``after_run`` may live on the provider keyed by the conversation.
The framework gives each run a ``SessionContext`` whose ``metadata`` is "shared metadata for cross-provider
communication": the record lives there, under a name of the provider's own. Saving per model call, the framework
hands the hooks a context per call that shares the run's ``metadata``; each call's ``before_run`` starts a new record.

``get_messages`` and ``save_messages`` are called by the base class's hooks without the context: while a hook runs,
its record is the *current* one (a context variable, so overlapping runs each see their own).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from agent_framework import Message

from ..vocabulary import Version

__all__ = ["RunRecord", "current_run", "run_of", "running", "start_run"]


@dataclass(slots=True)
class RunRecord:
    """One run's view of its conversation, from the load to the save.

    ``loaded``: the conversation as loaded, before the window (with compaction: its summary view; ``None``: not loaded);
    ``loaded_through``: the conversation's length then. ``appended`` and ``version``: what the run's save appended
    and the conversation's version after it.
    """

    loaded: Sequence[Message] | None = None
    loaded_through: int = 0
    appended: list[Message] = field(default_factory=list)
    version: Version | None = None


_CURRENT: ContextVar[RunRecord | None] = ContextVar("chatlab_current_run", default=None)


def _name(source_id: str) -> str:
    return f"chatlab.run.{source_id}"


def start_run(metadata: dict[str, Any], source_id: str) -> RunRecord:
    """A new record for the run (or model call) whose context carries ``metadata``."""
    record = RunRecord()
    metadata[_name(source_id)] = record
    return record


def run_of(metadata: dict[str, Any], source_id: str) -> RunRecord:
    """The record ``before_run`` started for this run (a new one where it did not run: ``load_messages=False``)."""
    record = metadata.get(_name(source_id))
    return record if isinstance(record, RunRecord) else start_run(metadata, source_id)


@contextmanager
def running(record: RunRecord) -> Iterator[RunRecord]:
    """Make ``record`` the current one while a hook calls ``get_messages`` or ``save_messages``."""
    token = _CURRENT.set(record)
    try:
        yield record
    finally:
        _CURRENT.reset(token)


def current_run() -> RunRecord | None:
    """The record of the hook running now, ``None`` outside the hooks (a caller's own ``get_messages``)."""
    return _CURRENT.get()
