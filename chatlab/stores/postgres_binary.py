"""PostgreSQL's binary format for the values the store sends past psycopg's cursor (:mod:`.postgres_raw`).

psycopg dumps a list element by element in Python (a dumper looked up per list, a call per element); a statement
whose parameter types never change can have its values packed here at once with :mod:`struct`. What PostgreSQL
receives is what psycopg's binary dumpers send: one-dimensional arrays with lower bound 1 (an empty one with no
dimension), ``NULL`` elements flagged in the header, text in the connection's encoding. A text value PostgreSQL
cannot hold (a NUL, a character the encoding lacks) and an ``int4`` out of range raise :class:`psycopg.DataError`
before anything is sent, as psycopg's dump (or, for the integer, the server's cast) refuses them.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import chain, repeat

TEXT, BYTEA, INT4, INT8, FLOAT8 = 25, 17, 23, 20, 701
"""The element types' OIDs."""
INT4_MIN, INT4_MAX = -(2**31), 2**31 - 1

HEAD = struct.Struct("!iiiii")  # dimensions (1), has nulls, element type, length, lower bound (1)
_EMPTY = struct.Struct("!iii")  # no dimension: an empty array
LENGTH = struct.Struct("!i")
NULL = LENGTH.pack(-1)
_INT4 = struct.Struct("!i")
_FLOAT8 = struct.Struct("!d")
_INT4_ELEMENT = struct.Struct("!ii")  # an element's length (4) and value
_FLOAT8_ELEMENT = struct.Struct("!id")  # an element's length (8) and value
_INT8_ELEMENT = struct.Struct("!iq")  # an element's length (8) and value


def encoded(text: str, encoding: str) -> bytes:
    """``text`` in the connection's ``encoding``; :class:`psycopg.DataError` where PostgreSQL cannot hold it."""
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as exc:
        import psycopg

        raise psycopg.DataError(f"the text cannot be written in {encoding}: {exc}") from exc
    if b"\0" in data:
        import psycopg

        raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    return data


def text(value: str | None, encoding: str) -> bytes | None:
    """A ``text`` parameter (``None``: ``NULL``)."""
    return None if value is None else encoded(value, encoding)


def int4(value: int) -> bytes:
    return _INT4.pack(_in_int4(value))


def float8(value: float | None) -> bytes | None:
    """A ``float8`` parameter (``None``: ``NULL``)."""
    return None if value is None else _FLOAT8.pack(value)


def _in_int4(value: int) -> int:
    if not INT4_MIN <= value <= INT4_MAX:
        import psycopg

        raise psycopg.DataError(f"integer out of range for int4: {value}")
    return value


def _array(oid: int, nulls: bool, elements: bytes, count: int) -> bytes:
    """An array of ``count`` packed ``elements``."""
    if not count:
        return _EMPTY.pack(0, 0, oid)
    return HEAD.pack(1, nulls, oid, count, 1) + elements


def text_array(values: Sequence[str | None], encoding: str) -> bytes:
    """A ``text[]`` parameter; ``None`` elements are ``NULL``."""
    if not values:
        return _array(TEXT, False, b"", 0)
    if None in values:
        return _text_array_with_nulls(values, encoding)
    strings: Sequence[str] = values  # type: ignore[assignment]  # no None: checked above
    try:  # all encoded at once, split again at the NULs put between them: one left inside is one too many
        parts = "\0".join(strings).encode(encoding).split(b"\0")
    except UnicodeEncodeError:
        parts = [encoded(value, encoding) for value in strings]  # raises the member's error
    if len(parts) != len(values):
        encoded("\0", encoding)  # raises psycopg's error of a NUL
    return _array(TEXT, False, _elements(parts), len(values))


def _text_array_with_nulls(values: Sequence[str | None], encoding: str) -> bytes:
    elements: list[bytes] = []
    for value in values:
        if value is None:
            elements.append(NULL)
        else:
            data = encoded(value, encoding)
            elements.append(LENGTH.pack(len(data)))
            elements.append(data)
    return _array(TEXT, True, b"".join(elements), len(values))


def bytea_array(values: Sequence[bytes]) -> bytes:
    """A ``bytea[]`` parameter (no ``NULL`` element: messages are never missing)."""
    return _array(BYTEA, False, _elements(values), len(values))


def _elements(values: Sequence[bytes]) -> bytes:
    """Each value after its length (the loops in C: map, zip and chain)."""
    return b"".join(chain.from_iterable(zip(map(LENGTH.pack, map(len, values)), values, strict=True)))


def float8_array(values: Sequence[float | None]) -> bytes:
    """A ``float8[]`` parameter; ``None`` elements are ``NULL``."""
    if None in values:
        pack = _FLOAT8_ELEMENT.pack
        elements = b"".join([NULL if value is None else pack(8, value) for value in values])
        return _array(FLOAT8, True, elements, len(values))
    return _array(FLOAT8, False, b"".join(map(_FLOAT8_ELEMENT.pack, repeat(8), values)), len(values))


def int8_array(values: Sequence[int | None]) -> bytes:
    """An ``int8[]`` parameter; ``None`` elements are ``NULL`` (values within ``bigint``: the caller clamps)."""
    pack = _INT8_ELEMENT.pack
    if None in values:
        elements = b"".join([NULL if value is None else pack(8, value) for value in values])
        return _array(INT8, True, elements, len(values))
    return _array(INT8, False, b"".join(map(pack, repeat(8), values)), len(values))


def int4_array(values: Sequence[int]) -> bytes:
    """An ``int4[]`` parameter (no ``NULL`` element)."""
    if values:
        _in_int4(min(values))
        _in_int4(max(values))
    return _array(INT4, False, b"".join(map(_INT4_ELEMENT.pack, repeat(4), values)), len(values))


def load_int4(data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)


def load_text(data: bytes | None, encoding: str) -> str | None:
    return None if data is None else data.decode(encoding)
