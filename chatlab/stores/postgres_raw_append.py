"""The append functions' calls as :func:`~chatlab.stores.postgres_raw.fetch` sends them: parameters packed in
binary at once, rows read from the binary result.

Through psycopg's cursor a batch's twelve arrays were dumped element by element in Python (most of the client's
CPU of an append batch); here each is packed at once (:mod:`.postgres_binary`). The statements, their parameter
types and their rows are the single append's and the batch append function's, unchanged.

Measured: the store alone's client CPU per append ~19 -> ~14 µs in batches of 16, ~142 -> ~102 µs alone; over HTTP
(the bench's append load, 5 alternating pairs) the service's ~74 -> ~69 µs per append (median; lower in every pair).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .postgres_binary import bytea_array, float8, float8_array, int4, int4_array, load_int4, load_text, text, text_array

AppendRow = tuple[str | None, str | None, str | None, str | None]
"""What an append function returns for a member: the version before, the idempotency record's fingerprint and
version, the version written (``None`` when refused)."""


def append_parameters(member: tuple[Any, ...], encoding: str) -> list[bytes | None]:
    """The single append function's parameters, binary (see ``postgres_sql.APPEND_STATEMENT``)."""
    lock, key, now, count, bodies, generation, written, if_match, idem, fingerprint, expiry = member
    return [
        text(lock, encoding),
        text(key, encoding),
        float8(now),
        int4(count),
        bytea_array(bodies),
        text(generation, encoding),
        float8(written),
        None if if_match is None else text_array(if_match, encoding),
        text(idem, encoding),
        text(fingerprint, encoding),
        float8(expiry),
    ]


def append_batch_parameters(members: Sequence[tuple[Any, ...]], encoding: str) -> list[bytes | None]:
    """The batch append function's parameters, binary: the single append's, one array element per member (the
    messages and the ``if_match`` lists flattened, with the lists' lengths, -1 for none)."""
    lock, key, now, count, bodies, generation, written, if_match, idem, fingerprint, expiry = zip(*members, strict=True)
    return [
        text_array(lock, encoding),
        text_array(key, encoding),
        float8_array(now),
        int4_array(count),
        bytea_array([body for batch in bodies for body in batch]),
        text_array(generation, encoding),
        float8_array(written),
        text_array([version for versions in if_match if versions is not None for version in versions], encoding),
        int4_array([-1 if versions is None else len(versions) for versions in if_match]),
        text_array(idem, encoding),
        text_array(fingerprint, encoding),
        float8_array(expiry),
    ]


def append_row(result: Any, encoding: str) -> AppendRow:
    """The single append function's one row."""
    value = result.get_value
    return (
        load_text(value(0, 0), encoding),
        load_text(value(0, 1), encoding),
        load_text(value(0, 2), encoding),
        load_text(value(0, 3), encoding),
    )


def append_batch_rows(result: Any, encoding: str, count: int) -> list[AppendRow]:
    """The batch append function's rows, one per member, put in the members' order by their 1-based index."""
    value = result.get_value
    rows: list[Any] = [None] * count
    for i in range(result.ntuples):
        rows[load_int4(value(i, 0)) - 1] = (
            load_text(value(i, 1), encoding),
            load_text(value(i, 2), encoding),
            load_text(value(i, 3), encoding),
            load_text(value(i, 4), encoding),
        )
    return rows
