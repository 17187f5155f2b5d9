"""API keys (bearer tokens), each scoped to a namespace of conversations (docs/protections.md). Only SHA-256 digests
are kept, compared with :func:`hmac.compare_digest` against every one; errors name the line, never the key."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ...vocabulary import NAMESPACE_SEPARATOR, is_plain

NAMESPACE_PATTERN = r"[A-Za-z0-9_-]{1,64}"
KEY_PATTERN = r"[A-Za-z0-9._~+/-]+=*"
MIN_KEY_LENGTH = 16


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request: its namespace (``None`` when the service has no API keys) and rate-limit identity."""

    namespace: str | None
    identity: str

    def stored_key(self, conversation_key: str) -> str:
        """The key the store keeps the caller's conversation under: its namespace's prefix, then the key."""
        return self.prefix + conversation_key

    @property
    def prefix(self) -> str:
        """The stored-key prefix of the caller's conversations (``""`` when keys are off)."""
        return "" if self.namespace is None else f"{self.namespace}{NAMESPACE_SEPARATOR}"

    @property
    def plain(self) -> bool:
        """Whether the caller sees only the keys outside every namespace (a service without API keys): what a
        listing asks the store for (``summaries(plain=True)``), so hidden keys cost the store nothing."""
        return self.namespace is None

    def owns(self, stored_key: str) -> bool:
        """Whether a stored key is the caller's: under its namespace, or, without API keys, under none (a
        ``namespace/key`` written while keys were on stays hidden: a key in a URL path cannot hold ``/``)."""
        if self.namespace is None:
            return is_plain(stored_key)
        return stored_key.startswith(self.prefix)


def new_api_key() -> str:
    """A fresh random key: 43 URL-safe characters (256 bits)."""
    return secrets.token_urlsafe(32)


class ApiKeys:
    """The configured keys (key -> namespace, or ``(key, namespace)`` pairs), kept as digests."""

    def __init__(self, keys: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        pairs = list(keys.items()) if isinstance(keys, Mapping) else list(keys)
        for i, (key, namespace) in enumerate(pairs, 1):
            _check_entry(key, namespace, f"key {i}")
        self._entries = _one_namespace_each((_digest(key), namespace) for key, namespace in pairs)

    @classmethod
    def parse(cls, text: str, *, source: str = "CHATLAB_API_KEYS") -> ApiKeys:
        """Read ``NAMESPACE:KEY`` entries (newline or comma separated, ``#`` comments)."""
        pairs: list[tuple[str, str]] = []
        for number, line in enumerate(text.splitlines(), 1):
            for entry in filter(None, map(str.strip, line.split("#", 1)[0].split(","))):
                namespace, sep, key = entry.partition(":")
                if not sep:
                    raise ValueError(f"{source} line {number}: expected NAMESPACE:KEY entries (the key is not shown)")
                _check_entry(key.strip(), namespace.strip(), f"{source} line {number}")
                pairs.append((key.strip(), namespace.strip()))
        if not pairs:
            raise ValueError(f"{source} holds no NAMESPACE:KEY entry")
        return cls(pairs)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ApiKeys:
        """The keys of a file of ``NAMESPACE:KEY`` lines (:meth:`parse`); a ``ValueError`` that names the file."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read the API keys file {path}: {exc.strerror or exc}") from None
        return cls.parse(text, source=str(path))

    @classmethod
    def combine(cls, *sets: ApiKeys) -> ApiKeys:
        """Every key of ``sets``; refused if one key comes with two namespaces."""
        combined = cls.__new__(cls)
        combined._entries = _one_namespace_each(entry for keys in sets for entry in keys._entries)
        return combined

    def namespace_of(self, key: str) -> tuple[int, str] | None:
        """``(entry number, namespace)`` of a presented key, or ``None``; constant time in the key."""
        digest = _digest(key)
        found: tuple[int, str] | None = None
        for i, (known, namespace) in enumerate(self._entries):
            if hmac.compare_digest(digest, known) and found is None:
                found = (i, namespace)
        return found

    @property
    def namespaces(self) -> list[str]:
        """The namespaces the keys open, sorted."""
        return sorted({namespace for _, namespace in self._entries})

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        """Equal when they accept the same keys for the same namespaces (a re-run notebook cell builds equal ones)."""
        return isinstance(other, ApiKeys) and set(self._entries) == set(other._entries)

    def __hash__(self) -> int:
        return hash(frozenset(self._entries))

    def __repr__(self) -> str:  # never the keys
        return f"<ApiKeys {len(self._entries)} keys, namespaces {', '.join(self.namespaces)}>"


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def _one_namespace_each(entries: Iterable[tuple[bytes, str]]) -> list[tuple[bytes, str]]:
    """The entries, each key once; refused if a key comes with two namespaces, or if there is none."""
    found: dict[bytes, str] = {}
    for digest, namespace in entries:
        first = found.setdefault(digest, namespace)
        if first != namespace:
            raise ValueError(f"one key is given for namespaces {first!r} and {namespace!r}: a key has one namespace")
    if not found:
        raise ValueError("no API keys given: give at least one NAMESPACE:KEY entry")
    return list(found.items())


def _check_entry(key: str, namespace: str, where: str) -> None:
    if not isinstance(namespace, str) or not re.fullmatch(NAMESPACE_PATTERN, namespace):
        raise ValueError(f"{where}: the namespace must be 1 to 64 letters, digits, '_' or '-'")
    if not isinstance(key, str) or not re.fullmatch(KEY_PATTERN, key):
        raise ValueError(
            f"{where} (namespace {namespace!r}): the key must be a bearer token: letters, digits and -._~+/ "
            "(the key is not shown)"
        )
    if len(key) < MIN_KEY_LENGTH:
        raise ValueError(
            f"{where} (namespace {namespace!r}): the key is shorter than {MIN_KEY_LENGTH} characters; "
            "make one with `python -m chatlab api-key NAMESPACE`"
        )
