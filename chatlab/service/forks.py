"""A fork: a new conversation holding a conversation's first N messages, with tags saying where it came from.

Its key is the caller's (``?key=``, checked by the one key rule) or made by the service: random, or fixed by the
``Idempotency-Key`` so that a retry names the same fork. With an ``Idempotency-Key`` the fingerprint covers the
request (the source's key, ``through`` and ``key``), never the source's messages, so a retry gets the first answer
whatever happened since (the source grown or deleted, the fork edited) and writes nothing."""

from __future__ import annotations

import hashlib
import uuid

from ..stores.base import ABSENT, Idempotency, IdempotencyKeyReused, VersionMismatch, WriteResult
from ..stores.metadata import MetadataChange
from ..vocabulary import FORK_OF, FORK_THROUGH, Refused
from .conditions import Conditions
from .context import ServiceContext
from .parameters import ForkQuery
from .security.auth import Caller
from .security.conditions import fingerprint

#: An ``If-Match`` that no version satisfies: an empty append under it only looks up an idempotency record (a store
#: answers a recorded request before it evaluates the condition, and writes nothing when the condition fails).
_LOOKUP_ONLY = ("not-a-version",)


async def fork(
    context: ServiceContext, caller: Caller, key: str, query: ForkQuery, conditions: Conditions
) -> tuple[str, WriteResult]:
    """Fork conversation ``key``: the new conversation's key and the write's result (``replayed`` for a retry)."""
    new_key = query.key if query.key is not None else _made_key(context, key, conditions.idempotency_key)
    stored = caller.stored_key(new_key)
    request = [key.encode(), f"through={query.through}".encode(), f"key={query.key}".encode()]
    idempotency = conditions.idempotency(fingerprint("fork", request), context.idempotency_ttl)
    try:
        if idempotency is not None:
            first = await _recorded(context, stored, idempotency)
            if first is not None:
                return new_key, first
        return new_key, await _copy(context, caller, key, new_key, query, conditions, idempotency)
    except IdempotencyKeyReused:
        raise Refused(
            422,
            f"this Idempotency-Key was already used for another fork of {key!r} (another through or key): use a new "
            "key for each new fork; nothing was written",
        ) from None


async def _copy(
    context: ServiceContext,
    caller: Caller,
    key: str,
    new_key: str,
    query: ForkQuery,
    conditions: Conditions,
    idempotency: Idempotency | None,
) -> WriteResult:
    """The first time: copy the source's first messages under ``If-Match``, then tag where the fork came from."""
    store = context.store
    stored = caller.stored_key(new_key)
    source = await store.read(caller.stored_key(key))
    if not source.messages:
        raise Refused(404, f"there is no conversation {key!r} to fork")
    conditions.check(source.version)
    through = len(source.messages) if query.through is None else query.through
    if through > len(source.messages):
        raise Refused(
            422, f"through={through}: the conversation holds {len(source.messages)} messages; fork at most those"
        )
    # checked before anything is written (a key longer than a tag value allows cannot be recorded as the origin)
    origin = MetadataChange.setting(tags={FORK_OF: key, FORK_THROUGH: str(through)})
    try:
        result = await store.append(stored, source.messages[:through], if_match=[ABSENT], idempotency=idempotency)
    except VersionMismatch:
        raise Refused(
            409,
            f"the fork's key {new_key!r} is taken by another conversation: name a new one "
            "with ?key=; nothing was written",
        ) from None
    if not result.replayed:  # the first answer only: a replay writes nothing
        await store.set_metadata(stored, origin)
    return result


def _made_key(context: ServiceContext, key: str, idempotency_key: str | None) -> str:
    """A new key of 32 hex digits: random, or fixed by the idempotency key so that a retry finds its fork; a 400
    asking the caller to name one when the key settings refuse it."""
    if idempotency_key is None:
        made = uuid.uuid4().hex
    else:
        made = hashlib.sha256(f"fork\n{key}\n{idempotency_key}".encode()).hexdigest()[:32]
    if not context.keys.fits(made):
        raise Refused(
            400,
            f"this service's key settings ({context.keys.words()}) refuse the keys it makes for forks (32 hex "
            "digits): name the fork's key with ?key=",
        )
    return made


async def _recorded(context: ServiceContext, stored: str, idempotency: Idempotency) -> WriteResult | None:
    """The first answer to this fork, if it was made before (its idempotency record); ``None`` if not."""
    try:
        return await context.store.append(stored, [], if_match=_LOOKUP_ONLY, idempotency=idempotency)
    except VersionMismatch:  # no record, and nothing written
        return None
