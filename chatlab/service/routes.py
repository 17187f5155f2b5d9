"""The endpoints: the article's API (a list of messages per conversation key), with paging, ``HEAD``, conditional
and idempotent writes, fork and metadata. Stored messages are answered as the bytes the store holds: reads never
re-encode. A conversation's ``ETag`` is its version, which ``If-Match`` and ``?after=N`` rely on (docs/protections.md).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote, urlencode

import anyio
import msgspec
from fastapi import Depends, FastAPI, Query, Request, Response
from pydantic import StringConstraints

from ..stores import ChatHistoryStore
from ..stores.base import ConversationSummary, Idempotency
from ..stores.metadata import MAX_TAG_NAME, MAX_TAG_VALUE, MetadataChange, TooManyTags
from ..vocabulary import ABSENT, FORK_OF, FORK_THROUGH, Refused
from . import jsontext, parameters
from . import schema as wire
from .authors import by_author, participants
from .bodies import BodyReader
from .callers import caller_functions
from .checkpoints import summary_view
from .openapi import COUNT_DOC, ETAG_DOC, LINK_DOC, ErrorDocs, body_doc, error_docs, header_doc, problem_doc
from .responses import Answer, json_answer, json_response
from .security.auth import Caller
from .security.conditions import etag, fingerprint, parse_idempotency_key, parse_if_match
from .settings import ServiceSettings

SERVICE_NAME = "chat-history-service"
_encode = msgspec.json.Encoder().encode


class Arguments:
    """Who calls and which conversation: ``caller`` as a FastAPI dependency, or both read by a conversation's
    endpoints from the request itself (:meth:`of`, described in OpenAPI by :meth:`documented`)."""

    def __init__(self, settings: ServiceSettings) -> None:
        dependency, self._resolve = caller_functions(settings)
        self.caller = Depends(dependency)
        self.check_key = parameters.conversation_key_check(settings)
        self._key = parameters.conversation_key_parameter(settings)
        self._security: dict[str, Any] = {"security": [{"ApiKey": []}]} if settings.api_keys else {}

    async def of(self, request: Request) -> tuple[Caller, str]:
        """Who calls, then which conversation (so no valid API key is a 401 whatever the key)."""
        caller = await self._resolve(request)
        return caller, self.check_key(request.path_params["conversationKey"])

    def documented(self, *read: dict[str, Any]) -> dict[str, Any]:
        """The ``openapi_extra`` of a conversation's route: the key, the other parameters it reads, the API keys."""
        return {"parameters": [self._key, *read], **self._security}


def add_routes(app: FastAPI, store: ChatHistoryStore, settings: ServiceSettings) -> None:
    """Add every endpoint."""
    arguments = Arguments(settings)
    errors = error_docs(settings)
    # a conversation's routes first: the router tries routes in order, and they serve nearly every request
    _add_reading_routes(app, store, arguments, errors)
    _add_writing_routes(app, store, settings, arguments, errors)
    _add_listing_routes(app, store, settings, arguments, errors)

    @app.api_route("/chat-history/", methods=["GET", "HEAD", "POST", "PUT", "DELETE"], include_in_schema=False)
    async def empty_key() -> Response:
        """``/chat-history/`` (an empty key) is a bad request, not the listing nor a 404."""
        raise Refused(
            400,
            "the conversation key is empty: use /chat-history/{conversationKey}, or GET /chat-history (no "
            "trailing slash) for the list of conversations",
        )


#: The largest page of ``GET /chat-history?limit=L``.
MAX_PAGE = 1000
#: What ``?tag=`` holds: a tag name, ``:``, and its value.
TAG_FILTER_PATTERN = rf"^[A-Za-z0-9_.-]{{1,{MAX_TAG_NAME}}}:[^\x00-\x1f]{{0,{MAX_TAG_VALUE}}}$"
TagFilter = Annotated[str, StringConstraints(pattern=TAG_FILTER_PATTERN)]


def _add_listing_routes(
    app: FastAPI, store: ChatHistoryStore, settings: ServiceSettings, arguments: Arguments, errors: ErrorDocs
) -> None:

    @app.get("/", response_model=wire.ServiceInfo, responses=errors.common, summary="Service name and description")
    async def service_info(caller: Caller = arguments.caller) -> Response:
        return json_response({"service": SERVICE_NAME, "description": store.description})

    after_query = Query(
        None,
        min_length=1,
        max_length=settings.key_max_length,
        pattern=settings.key_pattern,
        description="Only the conversations whose keys sort after this one (the last key of a page).",
    )

    @app.get(
        "/chat-history",
        response_model=list[wire.ChatHistorySummary],
        responses={
            200: {"headers": {"Link": LINK_DOC}},
            **errors.common,
            400: problem_doc("An invalid `limit`, `after` or `tag`."),
        },
        summary="Stored conversations and their message counts, ordered by key; ?limit=L&after=KEY for a page",
        description="Without parameters, every conversation (the article's request). `limit=L` answers at most L, "
        "with a `Link` header naming the next page while more remain; `after=KEY` starts after that key; "
        "`tag=name:value` (repeatable) keeps the conversations carrying every such tag.",
    )
    async def list_conversations(
        request: Request,
        caller: Caller = arguments.caller,
        limit: Annotated[int | None, Query(ge=1, le=MAX_PAGE, description="At most this many (a page).")] = None,
        after: str | None = after_query,
        tag: Annotated[
            list[TagFilter] | None,
            Query(description="`name:value`: only conversations carrying this tag (repeat for several)."),
        ] = None,
    ) -> Response:
        if request.scope["query_string"]:  # ``?limt=10`` would otherwise answer every conversation
            parameters.refuse_unknown_query(request, ("limit", "after", "tag"))
        wanted = _tag_filter(tag or [])
        cursor = caller.stored_key(arguments.check_key(after)) if after is not None else None
        if wanted is None:
            return json_answer(b"[]", [])
        if limit is None and cursor is None and not wanted:  # the article's request
            summaries = await store.summaries(caller.prefix)
            # sifted, formatted and encoded in a worker thread, a piece at a time: a long list must not hold the loop
            return json_answer(await anyio.to_thread.run_sync(_listing, summaries, caller), [])
        page, more = await _page(store, caller, cursor, limit, wanted)
        headers = []
        if more:
            last = page[-1].conversation_key[len(caller.prefix) :]
            query = urlencode([("limit", limit), ("after", last), *(("tag", t) for t in tag or [])])
            headers.append((b"link", f'</chat-history?{query}>; rel="next"'.encode("ascii")))
        return json_answer(_listing(page, caller), headers)  # a page: already the caller's


def _tag_filter(tags: list[str]) -> dict[str, str] | None:
    """``["name:value", ...]`` as a dict; ``None`` when one name is asked for two values (nothing matches)."""
    wanted: dict[str, str] = {}
    for text in tags:
        name, _, value = text.partition(":")
        if wanted.setdefault(name, value) != value:
            return None
    return wanted


async def _page(
    store: ChatHistoryStore, caller: Caller, cursor: str | None, limit: int | None, wanted: dict[str, str]
) -> tuple[list[ConversationSummary], bool]:
    """Up to ``limit`` of the caller's conversations after ``cursor``, and whether more remain (the store is asked
    for one more); keys the caller may not see (without API keys, the namespaced ones) are skipped."""
    found: list[ConversationSummary] = []
    while True:
        want = None if limit is None else limit + 1 - len(found)
        batch = await store.summaries(caller.prefix, after=cursor, limit=want, tags=wanted)
        found += [s for s in batch if caller.owns(s.conversation_key)]
        if limit is None:
            return found, False
        if len(found) > limit:
            return found[:limit], True
        if len(batch) < (want or 0):
            return found, False
        cursor = batch[-1].conversation_key


def _listing(summaries: list[ConversationSummary], caller: Caller) -> bytes:
    """The caller's summaries as JSON, encoded :data:`jsontext.PIECE` at a time (a call holds the GIL)."""
    rows = [_summary_row(s, caller.prefix) for s in summaries if caller.owns(s.conversation_key)]
    pieces = [_encode(rows[i : i + jsontext.PIECE])[1:-1] for i in range(0, len(rows), jsontext.PIECE)]
    return b"[" + b",".join(pieces) + b"]"


def _summary_row(summary: ConversationSummary, prefix: str) -> dict[str, Any]:
    """One conversation as the listing and ``PATCH`` answer it."""
    row: dict[str, Any] = {
        "conversationKey": summary.conversation_key[len(prefix) :],
        "messageCount": summary.message_count,
        "createdAt": iso_time(summary.created_at),
        "updatedAt": iso_time(summary.updated_at),
    }
    if summary.title is not None:
        row["title"] = summary.title
    if summary.tags:
        row["tags"] = dict(summary.tags)
    return row


def _add_reading_routes(app: FastAPI, store: ChatHistoryStore, arguments: Arguments, errors: ErrorDocs) -> None:

    @app.get(
        "/chat-history/{conversationKey}",
        response_model=list[wire.ChatMessage],
        responses={
            200: {"headers": {"ETag": ETAG_DOC, "X-Message-Count": COUNT_DOC, "Link": LINK_DOC}},
            **errors.keyed,
            400: problem_doc("An invalid conversation key, header, `after` or `limit`."),
        },
        summary="The messages of a conversation ([] for an unknown key); ?after=N&limit=L for part of it, "
        "?view=summary for the latest summary checkpoint and what follows it",
        description="Without parameters, every message in order (the article's request). `after=N` skips the "
        "first N, `limit=L` returns at most L; the `ETag` and `X-Message-Count` describe the whole conversation "
        "in the same snapshot as the messages returned.",
        openapi_extra=arguments.documented(parameters.AFTER, parameters.LIMIT, parameters.VIEW, parameters.AUTHOR),
    )
    async def get_messages(request: Request) -> Response:
        caller, key = await arguments.of(request)
        after, limit, summary = parameters.read_query(request)
        author = parameters.read_author(request)
        stored = caller.stored_key(key)
        if after is None and limit is None and not summary and author is None:  # the article's read
            whole = await store.read_array(stored)
            return json_answer(whole.array, _version_headers(whole.version, whole.count))
        start = after or 0
        if summary or author is not None:  # a view of the conversation, paged by after and limit
            snapshot = await store.read(stored)
            view = summary_view(snapshot.messages) if summary else snapshot.messages
            if author is not None:
                view = by_author(view, author)
            messages = view[start : None if limit is None else start + limit]
            total, query = len(view), _view_query(summary, author)
            headers = _version_headers(snapshot.version, len(snapshot.messages))
        else:
            part = await store.read_slice(stored, start, limit)
            messages, total, query = part.messages, part.count, ""
            headers = _version_headers(part.version, part.count)
        end = start + len(messages)
        if limit is not None and end < total:
            link = f'<{conversation_path(key)}?{query}after={end}&limit={limit}>; rel="next"'
            headers.append((b"link", link.encode("ascii")))
        return json_answer(b"[" + b",".join(messages) + b"]", headers)

    @app.head(
        "/chat-history/{conversationKey}",
        status_code=200,
        response_class=Response,
        responses={
            200: {
                "description": "No body: how many messages the conversation holds and its version "
                '(`X-Message-Count: 0` and `ETag: "0"` when it does not exist).',
                "headers": {"ETag": ETAG_DOC, "X-Message-Count": COUNT_DOC},
            },
            **errors.keyed,
        },
        summary="Whether a conversation exists and how many messages it holds, without reading them",
        openapi_extra=arguments.documented(),
    )
    async def count_messages(request: Request) -> Response:
        caller, key = await arguments.of(request)
        part = await store.read_slice(caller.stored_key(key), 0, 0)
        return Answer(200, _version_headers(part.version, part.count))  # no Content-Length: a GET's is not 0

    @app.get(
        "/chat-history/{conversationKey}/participants",
        response_model=wire.ConversationParticipants,
        responses={200: {"headers": {"ETag": ETAG_DOC}}, **errors.keyed},
        summary="Who took part: each author of the conversation's messages and how many it signed",
        description="Counted from the stored messages' `authorName` (docs/agents.md); an unknown key has none.",
        openapi_extra=arguments.documented(),
    )
    async def list_participants(request: Request) -> Response:
        caller, key = await arguments.of(request)
        if request.scope["query_string"]:
            parameters.refuse_unknown_query(request, ())
        snapshot = await store.read(caller.stored_key(key))
        authors = [{"authorName": name, "messageCount": count} for name, count in participants(snapshot.messages)]
        body = {"conversationKey": key, "messageCount": len(snapshot.messages), "participants": authors}
        return json_answer(_encode(body), _version_headers(snapshot.version, len(snapshot.messages)))


def _view_query(summary: bool, author: str | None) -> str:
    """The query naming a read's view, for its ``Link`` (``view=summary&author=...&``; empty for the plain read)."""
    names = [("view", "summary")] if summary else []
    if author is not None:
        names.append(("author", author))
    return urlencode(names, quote_via=quote) + "&" if names else ""


def conversation_path(key: str) -> str:
    """The path of a conversation as a ``Location`` or ``Link`` carries it: the key percent-encoded (RFC 3986)."""
    return "/chat-history/" + quote(key, safe="")


def iso_time(seconds: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC with milliseconds (``2026-04-16T01:30:52.123Z``)."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _version_headers(version: str, count: int) -> list[tuple[bytes, bytes]]:
    """``ETag`` and ``X-Message-Count``: the conversation's version and how many messages it holds."""
    return [(b"etag", etag(version).encode()), (b"x-message-count", str(count).encode())]


def _add_writing_routes(
    app: FastAPI, store: ChatHistoryStore, settings: ServiceSettings, arguments: Arguments, errors: ErrorDocs
) -> None:
    """``POST``, ``PUT``, ``DELETE``, fork and ``PATCH`` of one conversation."""
    read_messages = BodyReader(settings)
    ttl = settings.idempotency_ttl  # an Idempotency-Key's record, so that a retry is answered as the first time

    @app.post(
        "/chat-history/{conversationKey}",
        status_code=202,
        response_class=Response,
        responses={
            202: {
                "description": "Appended; `Location` names the conversation.",
                "headers": {
                    "Location": header_doc("`/chat-history/{conversationKey}`"),
                    "ETag": ETAG_DOC,
                    "Idempotent-Replayed": header_doc(
                        "`true` when this answers a retry of an append already applied.", required=False
                    ),
                },
            },
            **errors.writes,
            422: problem_doc("The `Idempotency-Key` was used before with other messages."),
        },
        summary="Append messages to a conversation",
        openapi_extra={
            **body_doc("AppendChatMessagesRequest"),
            **arguments.documented(parameters.IF_MATCH, parameters.IDEMPOTENCY_KEY),
        },
    )
    async def append_messages(request: Request) -> Response:
        caller, key = await arguments.of(request)
        if_match, idempotency_key = parameters.condition_headers(request)
        condition = parameters.parse_header(parse_if_match, if_match)
        idem_key = parameters.parse_header(parse_idempotency_key, idempotency_key)
        messages = await read_messages(request)
        idempotency = None if idem_key is None else Idempotency(idem_key, fingerprint("append", messages), ttl)
        result = await store.append(caller.stored_key(key), messages, if_match=condition, idempotency=idempotency)
        headers = _created_headers(key, result.version)
        if result.replayed:
            headers.append((b"idempotent-replayed", b"true"))
        return Answer(202, [*headers, (b"content-length", b"0")])

    @app.put(
        "/chat-history/{conversationKey}",
        status_code=204,
        response_class=Response,
        responses={204: {"description": "Replaced.", "headers": {"ETag": ETAG_DOC}}, **errors.writes},
        summary="Replace a conversation's messages",
        openapi_extra={**body_doc("ReplaceChatMessagesRequest"), **arguments.documented(parameters.IF_MATCH)},
    )
    async def replace_messages(request: Request) -> Response:
        caller, key = await arguments.of(request)
        condition = parameters.parse_header(parse_if_match, parameters.condition_headers(request)[0])
        messages = await read_messages(request)
        result = await store.replace(caller.stored_key(key), messages, if_match=condition)
        return Answer(204, [(b"etag", etag(result.version).encode())])

    @app.delete(
        "/chat-history/{conversationKey}",
        status_code=204,
        response_class=Response,
        responses={
            204: {"description": "Deleted (also when it did not exist, unless `If-Match: *` asks that it does)."},
            **errors.conditional,
        },
        summary="Delete a conversation",
        description="Without `If-Match`, as in the article. With the `ETag` of a GET, only if nobody wrote "
        "meanwhile: a client that read a conversation and decided to delete it never wipes an append it did not see.",
        openapi_extra=arguments.documented(parameters.IF_MATCH),
    )
    async def delete_conversation(request: Request) -> Response:
        caller, key = await arguments.of(request)
        condition = parameters.parse_header(parse_if_match, parameters.condition_headers(request)[0])
        await store.delete(caller.stored_key(key), if_match=condition)
        return Answer(204, [])

    @app.post(
        "/chat-history/{conversationKey}/fork",
        status_code=201,
        response_class=Response,
        responses={
            201: {
                "description": "Forked; `Location` names the new conversation.",
                "headers": {"Location": header_doc("`/chat-history/{newConversationKey}`"), "ETag": ETAG_DOC},
            },
            **errors.writes,
            404: problem_doc("No conversation to fork."),
            422: problem_doc("`through` beyond the conversation's messages, or an `Idempotency-Key` used before."),
        },
        summary="Fork a conversation: a new one holding its first N messages (all by default)",
        description="The new conversation's key is chosen by the service. With an `Idempotency-Key`, a retry answers "
        "the same new conversation and copies nothing twice.",
        openapi_extra=arguments.documented(parameters.THROUGH, parameters.IDEMPOTENCY_KEY),
    )
    async def fork_conversation(request: Request) -> Response:
        caller, key = await arguments.of(request)
        parameters.refuse_unknown_query(request, ("through",))
        through = parameters.read_position(request, "through", 1)
        idem_key = parameters.parse_header(parse_idempotency_key, parameters.condition_headers(request)[1])
        source = await store.read(caller.stored_key(key))
        if not source.messages:
            raise Refused(404, f"there is no conversation {key!r} to fork")
        if through is not None and through > len(source.messages):
            raise Refused(
                422, f"through={through}: the conversation holds {len(source.messages)} messages; fork at most those"
            )
        messages = source.messages[:through]
        # a new key (32 hex digits): random, or fixed by the idempotency key so that a retry finds its fork
        seed = f"fork\n{key}\n{idem_key}".encode()
        new_key = arguments.check_key(uuid.uuid4().hex if idem_key is None else hashlib.sha256(seed).hexdigest()[:32])
        stored = caller.stored_key(new_key)
        idempotency = None if idem_key is None else Idempotency(idem_key, fingerprint("fork", messages), ttl)
        result = await store.append(stored, messages, if_match=[ABSENT], idempotency=idempotency)
        # after the append (a retry of it sets the same tags again): where the fork came from
        await store.set_metadata(stored, MetadataChange(tags={FORK_OF: key, FORK_THROUGH: str(len(messages))}))
        return Answer(201, [*_created_headers(new_key, result.version), (b"content-length", b"0")])

    @app.patch(
        "/chat-history/{conversationKey}",
        response_model=wire.ChatHistorySummary,
        responses={
            200: {"description": "The conversation's summary after the change."},
            **errors.writes,
            404: problem_doc("No such conversation."),
            422: problem_doc("The change would leave more tags than a conversation may carry."),
        },
        summary="Set a conversation's title and tags (a JSON merge patch: null removes, what is not named stays)",
        description="Metadata is not part of the conversation's version: its `ETag` stays, and no cached history "
        "is invalidated. `replace` keeps it; `delete` drops it.",
        openapi_extra={**body_doc("ConversationMetadataPatch"), **arguments.documented()},
    )
    async def patch_metadata(request: Request) -> Response:
        caller, key = await arguments.of(request)
        change = wire.decode_metadata_patch(await read_messages.json_bytes(request))
        try:
            summary = await store.set_metadata(caller.stored_key(key), change)
        except TooManyTags as exc:
            raise Refused(422, f"{exc}: remove some with null; nothing was written") from None
        if summary is None:
            raise Refused(404, "there is no such conversation: write its messages first, then set its title and tags")
        return json_response(_summary_row(summary, caller.prefix))


def _created_headers(key: str, version: str) -> list[tuple[bytes, bytes]]:
    return [(b"location", conversation_path(key).encode("ascii")), (b"etag", etag(version).encode())]
