"""The store's hot statements (group reads; appends, :mod:`.postgres_raw_append`) run on the connection's libpq
handle, past psycopg's cursor.

A read statement's client CPU was mostly psycopg's machinery, not the exchange: a cursor and its transformer, the
arrays of keys and positions dumped element by element in Python, and a wait per step (a reader registered, a future
and a timer each). A read sends the same prepared statement each time with the same three parameter types, so here
the parameters are packed as binary arrays at once, the statement is prepared once per connection under a name of
its own, and the answer is awaited with one reader callback. The statement, its snapshot and its rows are the same:
only who builds the bytes differs. Each member's messages come as one ``bytea[]``, loaded by psycopg's own loader.

Measured over HTTP (GET load, 16 connections, PostgreSQL on the same 2 CPUs): ~48 -> ~40 µs of the service's CPU
per read, ~12 -> ~11 µs of the backend's; the store alone, ~77 -> ~48 µs per read in batches of 2 and ~15 -> ~10 in
batches of 16. Having the database join each conversation's messages into the JSON array a GET answers
(``string_agg`` in the statement) saved the service nothing more and cost the database ~4 µs a read: not done.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import weakref
from collections.abc import Sequence
from typing import Any

from .postgres_binary import int8_array, text_array

INT8_MAX = 2**63 - 1
_BYTEA_ARRAY_OID = 1001
_FORMATS = [(1,) * n for n in range(16)]  # every parameter binary, by their number

_prepared: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()
"""The statements prepared on each connection (a connection the pool replaces is a new key)."""


@functools.lru_cache(maxsize=64)
def statement_name(query: str) -> bytes:
    """The prepared statement's name: of its text, so another text never runs under it."""
    return b"chatlab_" + hashlib.sha1(query.encode()).hexdigest()[:16].encode()


def read_parameters(members: Sequence[tuple[str, int, int | None]], encoding: str = "utf-8") -> list[bytes]:
    """The read statement's three binary arrays: keys (in the connection's ``encoding``), first positions, most
    messages (``NULL``: all). A key PostgreSQL cannot hold (a NUL, a character the encoding lacks) raises
    :class:`psycopg.DataError`, as psycopg's own dump of it does.

    Positions past ``bigint`` read as far as any can be: an ``after`` there has no message after it, a ``limit``
    there is no limit (what the comparison of ``bigint`` positions with them would give)."""
    keys, afters, limits = zip(*members, strict=True)
    return [
        text_array(keys, encoding),
        int8_array([min(after, INT8_MAX) for after in afters]),
        int8_array([None if limit is None or limit > INT8_MAX else limit for limit in limits]),
    ]


async def fetch(conn: Any, query: str, parameters: Sequence[bytes | None]) -> Any:
    """Run ``query`` (prepared on ``conn`` on first use) with binary ``parameters`` (``None``: ``NULL``); its
    result, binary.

    A statement gone from the session (``DEALLOCATE`` by someone else) is prepared again, once."""
    from psycopg import errors

    pgconn = conn.pgconn
    name = statement_name(query)
    done = _prepared.get(conn)
    if done is None:
        done = _prepared[conn] = set()
    for attempt in (1, 2):
        if name not in done:
            pgconn.send_prepare(name, query.encode())
            prepared = await _result(pgconn)
            if not isinstance(_error(prepared, errors), errors.DuplicatePreparedStatement):  # else prepared before
                _check(prepared, errors)
            done.add(name)
        pgconn.send_query_prepared(name, parameters, param_formats=_FORMATS[len(parameters)], result_format=1)
        result = await _result(pgconn)
        error = _error(result, errors)
        if error is None:
            return result
        if attempt == 1 and isinstance(error, errors.InvalidSqlStatementName):
            done.discard(name)
            continue
        raise error
    raise AssertionError("unreachable")  # pragma: no cover


def _error(result: Any, errors: Any) -> Exception | None:
    """The error of a failed command's result, as psycopg raises it (``None``: it succeeded)."""
    from psycopg import pq

    if result.status in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
        return None
    error: Exception = errors.error_from_result(result)
    return error


def _check(result: Any, errors: Any) -> Any:
    error = _error(result, errors)
    if error is not None:
        raise error
    return result


async def _result(pgconn: Any) -> Any:
    """The command's last result, once the server has sent all of it (the socket read as it becomes readable)."""
    loop = asyncio.get_running_loop()
    while pgconn.flush():  # what did not fit in the socket's buffer: sent as it drains
        await _ready(loop, pgconn.socket, loop.add_writer, loop.remove_writer)
    while True:
        pgconn.consume_input()
        if not pgconn.is_busy():
            break
        await _ready(loop, pgconn.socket, loop.add_reader, loop.remove_reader)
    result = last = pgconn.get_result()
    while last is not None:
        last = pgconn.get_result()
    return result


async def _ready(loop: asyncio.AbstractEventLoop, fileno: int, add: Any, remove: Any) -> None:
    waiter = loop.create_future()
    add(fileno, _wake, waiter)
    try:
        await waiter
    finally:
        remove(fileno)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def read_rows(conn: Any, result: Any) -> list[tuple[int, str, Any] | None]:
    """The read statement's rows: count, version, messages (a list of ``bytes``); ``None`` for a conversation that
    does not exist."""
    encoding = conn.info.encoding
    load = _bytea_array_loader().load
    rows: list[tuple[int, str, Any] | None] = []
    value = result.get_value
    for i in range(result.ntuples):
        count = value(i, 0)
        if count is None:
            rows.append(None)
        else:
            version = value(i, 1).decode(encoding)
            rows.append((int.from_bytes(count, "big", signed=True), version, load(value(i, 2))))
    return rows


@functools.cache
def _bytea_array_loader() -> Any:
    """psycopg's own loader of a binary ``bytea[]`` (the default adapters': the store's connections change none)."""
    import psycopg
    from psycopg.pq import Format

    loader: Any = psycopg.adapters.get_loader(_BYTEA_ARRAY_OID, Format.BINARY)
    return loader(_BYTEA_ARRAY_OID, None)
