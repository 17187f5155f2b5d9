"""Opening the SQLite store's connections, all in WAL mode with the store's settings; the first one also creates or
upgrades the tables (:mod:`.schema`)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..base import StoreError
from .schema import ensure_schema

SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
"""SQLite's ``PRAGMA synchronous`` levels. In WAL mode ``FULL`` fsyncs every commit (a committed write survives a
power cut), ``NORMAL`` only at checkpoints (it survives a crash of the process, not of the machine)."""


def busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused because another connection holds a lock (worth waiting for)."""
    return "locked" in str(exc) or "busy" in str(exc)


@dataclass
class Connections:
    """Opens connections to one SQLite file (the settings are the store's; ``clock`` gives an upgrade's time)."""

    path: Path
    busy_timeout: float
    synchronous: str
    wal_autocheckpoint: int
    clock: Callable[[], float]
    _schema_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _schema_ready: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.synchronous.upper() not in SYNCHRONOUS:
            raise ValueError(f"synchronous={self.synchronous!r}: use one of {', '.join(SYNCHRONOUS)}")
        if self.wal_autocheckpoint < 0:
            raise ValueError(f"wal_autocheckpoint={self.wal_autocheckpoint}: give a number of pages, 0 or more")
        self.synchronous = self.synchronous.upper()

    def open(self) -> sqlite3.Connection:
        """A new connection in WAL mode, with the tables in place; transactions are begun explicitly."""
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout,  # the busy handler: wait for other processes' write locks
            isolation_level=None,  # no implicit transactions: each function says BEGIN itself
            check_same_thread=False,  # used by one thread at a time (the thread that opened it, or a successor)
        )
        try:
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute(f"PRAGMA wal_autocheckpoint={self.wal_autocheckpoint}")
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                with self._schema_lock:
                    mode = self._switch_to_wal(conn)
                if str(mode).lower() != "wal":
                    raise StoreError(f"SQLite store {self.path}: cannot switch to WAL journal mode (got {mode!r})")
            with self._schema_lock:
                if not self._schema_ready:
                    ensure_schema(conn, self.clock(), self.path)
                    self._schema_ready = True
        except BaseException:
            conn.close()
            raise
        return conn

    def _switch_to_wal(self, conn: sqlite3.Connection) -> object:
        """Switching needs the file to itself and SQLite does not wait for that (no busy handler): retry."""
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                return conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if not busy(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(0.01)
