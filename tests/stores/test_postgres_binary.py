"""The binary packing of the values the PostgreSQL store sends past psycopg's cursor (real PostgreSQL): what the
server reads back is what was packed (NULLs, empty arrays, non-ASCII text, large values), and what it could not
hold is refused before anything is sent, with psycopg's error."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from chatlab.stores import postgres_binary as binary

SAMPLES = ["a", "", "été ✓", "現在時刻を教えてください", "x" * 70_000, "🙂 emoji"]


@pytest.fixture
def conn(postgres_server: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(postgres_server, autocommit=True) as connection:
        yield connection


def roundtrip(conn: Any, cast: str, value: bytes | None) -> Any:
    """The value as PostgreSQL reads it from the packed bytes, loaded back by psycopg."""
    from psycopg import errors, pq

    result = conn.pgconn.exec_params(f"SELECT $1::{cast}".encode(), [value], param_formats=[1], result_format=1)
    if result.status != pq.ExecStatus.TUPLES_OK:
        raise errors.error_from_result(result)
    data = result.get_value(0, 0)
    if data is None:
        return None
    loader = conn.adapters.get_loader(result.ftype(0), pq.Format.BINARY)(result.ftype(0), conn)
    return loader.load(data)


def test_text_arrays_with_nulls_empty_non_ascii_and_large(conn: Any) -> None:
    encoding = conn.info.encoding
    cases: list[list[str | None]] = [list(SAMPLES), [None], [None, "été", None, ""], [], [""], ["a" * 3_000_000]]
    for values in cases:
        assert roundtrip(conn, "text[]", binary.text_array(values, encoding)) == values
    assert roundtrip(conn, "text[]", binary.text_array([], encoding)) == []
    assert roundtrip(conn, "text", binary.text("été ✓", encoding)) == "été ✓"
    assert roundtrip(conn, "text", binary.text(None, encoding)) is None


def test_bytea_arrays_with_empty_and_large_values(conn: Any) -> None:
    values = [b"", b"\x00\xff\x00", "été".encode(), bytes(range(256)) * 20_000]  # 5 MB
    assert roundtrip(conn, "bytea[]", binary.bytea_array(values)) == values
    assert roundtrip(conn, "bytea[]", binary.bytea_array([])) == []


def test_numbers_with_nulls_extremes_and_empty(conn: Any) -> None:
    floats = [0.0, -0.0, 1.5, 1e308, -1e-308, math.inf, 1764547200.123456]
    assert roundtrip(conn, "float8[]", binary.float8_array(floats)) == floats
    assert roundtrip(conn, "float8[]", binary.float8_array([None, 2.5, None])) == [None, 2.5, None]
    assert roundtrip(conn, "float8[]", binary.float8_array([])) == []
    assert roundtrip(conn, "float8", binary.float8(1764547200.5)) == 1764547200.5
    assert roundtrip(conn, "float8", binary.float8(None)) is None
    ints = [0, -1, 4, binary.INT4_MAX, binary.INT4_MIN]
    assert roundtrip(conn, "int4[]", binary.int4_array(ints)) == ints
    assert roundtrip(conn, "int4[]", binary.int4_array([])) == []
    assert roundtrip(conn, "int4", binary.int4(-7)) == -7
    longs = [0, -1, 2**63 - 1, -(2**63), 20]
    assert roundtrip(conn, "int8[]", binary.int8_array(longs)) == longs
    assert roundtrip(conn, "int8[]", binary.int8_array([None, 3, None])) == [None, 3, None]
    assert roundtrip(conn, "int8[]", binary.int8_array([])) == []


def test_what_postgresql_cannot_hold_is_refused_before_sending(conn: Any) -> None:
    """A NUL or a lone surrogate anywhere in a text array (with NULLs beside it or not), an ``int4`` out of range:
    :class:`psycopg.DataError`, the error whose member then runs alone."""
    import psycopg

    encoding = conn.info.encoding
    refused: list[list[str | None]] = [["ok", "bad\x00"], ["\x00"], [None, "bad\x00"], ["ok", "bad\ud800"]]
    refused.append([None, "\udfff"])
    for values in refused:
        with pytest.raises(psycopg.DataError):
            binary.text_array(values, encoding)
    for value in ["a\x00b", "\ud800"]:
        with pytest.raises(psycopg.DataError):
            binary.text(value, encoding)
    for numbers in [[0, 2**31], [-(2**31) - 1]]:
        with pytest.raises(psycopg.DataError):
            binary.int4_array(numbers)
    with pytest.raises(psycopg.DataError):
        binary.int4(2**31)


def test_text_in_another_client_encoding(postgres_server: str) -> None:
    """Text goes in the connection's encoding: a LATIN1 session reads "été" back, and refuses what LATIN1 lacks."""
    import psycopg

    with psycopg.connect(postgres_server, autocommit=True, client_encoding="LATIN1") as latin:
        encoding = latin.info.encoding
        assert roundtrip(latin, "text[]", binary.text_array(["été", None], encoding)) == ["été", None]
        with pytest.raises(psycopg.DataError):
            binary.text_array(["été", "✓"], encoding)
