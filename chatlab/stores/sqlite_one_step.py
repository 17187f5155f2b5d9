"""A group of appends as one SQLite statement, in autocommit: one step writes, commits and fsyncs it.

Why: the writer thread needs the GIL between the statements of a transaction (``BEGIN``, the read, the writes,
``COMMIT``), and the service's event loop holds the GIL while it answers and reads requests, so each of those
hand-offs waited for the loop to go idle: the group's writes could not overlap the loop's work, and a
group took every request in flight (the appends' cycle was serial: read them all, write, fsync, answer them all).
Here the whole group is one ``INSERT`` into a temporary view whose ``INSTEAD OF`` trigger writes each append's
conversation, messages and idempotency record; in autocommit the statement is its own transaction, so
``sqlite3`` runs write, ``COMMIT`` and fsync in one call without the GIL, while the loop answers the group
before and reads the next.

What the appends decide needs each conversation's version and count: the writer keeps those it last wrote or
read (:class:`KnownStates`, hints only; a conversation they do not know is assumed absent). The statement checks
every state it relies on, and the records' unique index refuses a key used before, so a state another connection
or process changed, a conversation assumed absent that exists, or a replayed idempotency key aborts the whole
statement (nothing written), and the group runs as before (:func:`.sqlite_append.append_group` in ``BEGIN
IMMEDIATE``), which refreshes the hints. So an append's answer is what that path gives, and as durable
(``synchronous=FULL``: committed and fsync'ed before the step returns).
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Sequence

from ._group_commit import busy
from .base import ABSENT, VersionMismatch, WriteResult, appended_version, version_matches
from .sqlite_append import Outcome, Request

log = logging.getLogger(__name__)

#: One row an append: k = the conversation, a = the version it is assumed to have (NULL: assumed absent), b = its
#: count, c = the version to write (NULL: nothing to write, only the check), d = the new count, e = the time,
#: bodies = the messages joined, lengths = their lengths as a JSON array, i, f, v, x = the idempotency record (key,
#: fingerprint, version, expiry; i NULL: none). A row with k NULL is padding: row counts are powers of two, so
#: few statement texts are prepared. The messages are cut from ``bodies`` by their lengths, byte for byte.
INBOX = (
    "CREATE TEMP VIEW IF NOT EXISTS chatlab_inbox (k, a, b, c, d, e, bodies, lengths, i, f, v, x) AS "
    "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL",
    "CREATE TEMP TRIGGER IF NOT EXISTS chatlab_inbox_append INSTEAD OF INSERT ON chatlab_inbox "
    "WHEN NEW.k IS NOT NULL BEGIN "
    "SELECT RAISE(ABORT, 'chatlab: the conversation changed') WHERE NEW.a IS NOT NULL AND NOT EXISTS ("
    "SELECT 1 FROM chatlab_conversations WHERE conversation_key = NEW.k AND version = NEW.a "
    "AND message_count = NEW.b); "
    "SELECT RAISE(ABORT, 'chatlab: the conversation exists') WHERE NEW.a IS NULL AND EXISTS ("
    "SELECT 1 FROM chatlab_conversations WHERE conversation_key = NEW.k); "
    "INSERT INTO chatlab_conversations (conversation_key, message_count, version, created_at, updated_at) "
    "SELECT NEW.k, NEW.d, NEW.c, NEW.e, NEW.e WHERE NEW.c IS NOT NULL ON CONFLICT (conversation_key) DO UPDATE SET "
    "message_count = excluded.message_count, version = excluded.version, updated_at = excluded.updated_at; "
    "INSERT INTO chatlab_messages (conversation_key, position, body) "
    "SELECT NEW.k, NEW.b + j.key, substr(NEW.bodies, 1 + sum(j.value) OVER w - j.value, j.value) "
    "FROM json_each(NEW.lengths) AS j WHERE NEW.c IS NOT NULL WINDOW w AS (ORDER BY j.key ROWS UNBOUNDED PRECEDING); "
    "INSERT INTO chatlab_idempotency (conversation_key, idempotency_key, fingerprint, version, expires_at) "
    "SELECT NEW.k, NEW.i, NEW.f, NEW.v, NEW.x WHERE NEW.i IS NOT NULL; END",
)
WIDTH = 12
MAX_ROWS = 64
"""A larger group runs the other way: 64 rows are 768 parameters, within every SQLite's limit (999 before 3.32).
The writer offers groups of at most :data:`._group_commit.ONE_STEP_GROUP` appends, one row each."""
MAX_KNOWN = 65_536
"""Conversation states kept as hints (the oldest dropped first): a few MB at most."""
_PAD = (None,) * WIDTH


@functools.cache
def _insert(rows: int) -> str:
    return "INSERT INTO chatlab_inbox VALUES " + ",".join(["(" + ",".join("?" * WIDTH) + ")"] * rows)


class KnownStates:
    """Each conversation's (version, count) as this writer last wrote or read it: hints, checked when used."""

    def __init__(self) -> None:
        self._states: dict[str, tuple[str, int]] = {}

    def get(self, key: str) -> tuple[str, int] | None:
        return self._states.get(key)

    def learn(self, states: dict[str, tuple[str, int]]) -> None:
        for key, state in states.items():
            self._states.pop(key, None)  # to the end: the newest are dropped last
            self._states[key] = state
        while len(self._states) > MAX_KNOWN:
            del self._states[next(iter(self._states))]

    def forget(self, keys: Sequence[str]) -> None:
        for key in keys:
            self._states.pop(key, None)


class OneStepAppends:
    """Tries a group of appends as one statement (:meth:`attempt`); ``None`` when it must run the other way."""

    def __init__(self) -> None:
        self.known = KnownStates()
        self._ready_on: sqlite3.Connection | None = None  # the connection that has the view and its trigger
        self._unavailable = False

    def attempt(
        self, conn: sqlite3.Connection, requests: Sequence[Request], now: float, written: float
    ) -> list[Outcome] | None:
        """Decide ``requests`` on the known states and write them in one committed statement; ``None`` (nothing
        written) when the group is too large or refused as planned, or the statement refused what it assumed."""
        planned = self._plan(requests, now, written)
        if planned is None:
            return None
        outcomes, rows, states = planned
        size = 1 << (len(rows) - 1).bit_length()
        if size > MAX_ROWS or not self._prepare(conn):
            return None
        params = [value for row in rows for value in row]
        params += _PAD * (size - len(rows))
        try:
            conn.execute(_insert(size), params)
        except sqlite3.IntegrityError:  # a hint was stale, or a key was used before: the other way decides
            self.known.forget([key for key, *_ in requests])
            return None
        except sqlite3.OperationalError as exc:  # another connection's write lock: the other way waits for it
            if busy(exc):
                return None
            raise
        except (UnicodeEncodeError, OverflowError):  # a value sqlite3 cannot bind: the other way answers as it does
            return None
        self.known.learn(states)
        return outcomes

    def _plan(
        self, requests: Sequence[Request], now: float, written: float
    ) -> tuple[list[Outcome], list[tuple[object, ...]], dict[str, tuple[str, int]]] | None:
        """Outcomes, rows and the states they leave, each append decided in order as if alone, as
        :func:`.sqlite_append.append_group` decides (a conversation the hints do not know is assumed absent);
        ``None`` for a group with an idempotent append its ``If-Match`` refuses (a replay would win over that)."""
        states: dict[str, tuple[str, int]] = {}
        outcomes: list[Outcome] = []
        rows: list[tuple[object, ...]] = []
        for key, batch, if_match, idempotency in requests:
            version, count = states.get(key) or self.known.get(key) or (ABSENT, 0)  # unknown: assumed absent
            assumed = None if version == ABSENT else version
            if not version_matches(version, if_match):
                if idempotency is not None:  # a replay wins over If-Match: only the other way reads records
                    return None
                rows.append((key, assumed, count, None, None, None, None, None, None, None, None, None))
                outcomes.append((None, VersionMismatch(version)))  # holds only if the row's check does
                continue
            if batch:
                new_count = count + len(batch)
                new_version = appended_version(version, new_count)
                written_as: tuple[object, ...] = (new_version, new_count, written, b"".join(batch), _lengths(batch))
            else:
                new_version, new_count, written_as = version, count, (None,) * 5
            record: tuple[object, ...] = (None,) * 4
            if idempotency is not None:
                record = (idempotency.key, idempotency.fingerprint, new_version, now + idempotency.ttl)
            rows.append((key, assumed, count, *written_as, *record))
            states[key] = (new_version, new_count)
            outcomes.append((WriteResult(new_version), None))
        return outcomes, rows, {key: state for key, state in states.items() if state[0] != ABSENT}

    def _prepare(self, conn: sqlite3.Connection) -> bool:
        """The temporary view and trigger, once per connection (they live as long as it does); ``False`` where this
        SQLite cannot run them (no ``json_each`` or window functions: the other way is used from then on)."""
        if self._ready_on is conn:
            return True
        if self._unavailable:
            return False
        try:
            for statement in INBOX:
                conn.execute(statement)
            conn.execute(_insert(1), _PAD)  # compiles the trigger: a missing function fails here, writing nothing
        except sqlite3.OperationalError as exc:
            if not busy(exc):
                self._unavailable = True
                log.warning(
                    "SQLite %s cannot write appends in one step (%s): each group uses a transaction",
                    sqlite3.sqlite_version,
                    exc,
                )
            return False
        self._ready_on = conn
        return True


def _lengths(batch: Sequence[bytes]) -> str:
    """The messages' lengths in bytes, as the JSON array the trigger cuts ``bodies`` by."""
    return "[" + ",".join(map(str, map(len, batch))) + "]"
