"""The endpoints: the article's API (a list of messages per conversation key), with paging, ``HEAD``, conditional
and idempotent writes, fork and metadata. Each is a module-level function of the request that finds the store and
settings in its :class:`~.context.ServiceContext`, reads its query with its one declaration (:mod:`.parameters`)
and its conditions in one place (:mod:`.conditions`). Stored messages are answered as the bytes the store holds:
reads never re-encode. A conversation's ``ETag`` is its version, which ``If-Match`` and ``?after=N`` rely on
(docs/protections.md). :func:`add_routes` puts them on the app's ``APIRouter``, whose
route class is :class:`~.request_route.RequestRoute`, with the OpenAPI description the settings make."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

import msgspec
from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.responses import StreamingResponse

from ..authors import ranked
from ..stores import ChatHistoryStore
from ..stores.base import ConversationSummary, summary_of
from ..vocabulary import ABSENT, Refused, conversation_path
from . import conditions as headers_of
from . import schema as wire
from .authors import by_author
from .checkpoints import summary_view
from .conditions import IDEMPOTENCY_KEY, IF_MATCH, Conditions, read_conditions
from .context import ServiceContext, context_of
from .forks import fork
from .openapi import COUNT_DOC, ETAG_DOC, LINK_DOC, ErrorDocs, body_doc, error_docs, header_doc, problem_doc
from .parameters import ForkQuery, ListingQuery, MessagesQuery, NoQuery, documented, read_query
from .patches import decode_metadata_patch
from .responses import JSON, Answer, json_answer, json_response
from .security.auth import Caller
from .security.conditions import etag, fingerprint
from .settings import ServiceSettings

SERVICE_NAME = "chat-history-service"
_encode = msgspec.json.Encoder().encode

#: The condition headers each write honours (and OpenAPI lists).
APPEND_CONDITIONS = (IF_MATCH, IDEMPOTENCY_KEY)
REPLACE_CONDITIONS = (IF_MATCH,)
DELETE_CONDITIONS = (IF_MATCH,)
FORK_CONDITIONS = (IF_MATCH, IDEMPOTENCY_KEY)
PATCH_CONDITIONS = (IF_MATCH,)


async def service_info(request: Request) -> Response:
    """``GET /``: the service's name and where it keeps the history."""
    return json_response({"service": SERVICE_NAME, "description": context_of(request).store.description})


async def list_conversations(request: Request) -> Response:
    """``GET /chat-history``: every conversation (the article's request), or a page of them."""
    context = context_of(request)
    caller = await context.caller(request)
    query = read_query(ListingQuery, request, context.keys)
    wanted = _tag_filter(query.tag)
    if wanted is None:
        return json_answer(b"[]", [])
    cursor = None if query.after is None else caller.stored_key(query.after)
    if query.limit is None:  # every conversation (the article's request), or every one after a key or with tags
        first = await _page(context.store, caller, cursor, LISTING_PIECE, wanted)  # a store's refusal is still a 5xx
        return StreamingResponse(_streamed_listing(context.store, caller, wanted, first), media_type=JSON)
    page, more = await _page(context.store, caller, cursor, query.limit, wanted)
    headers = []
    if more:
        last = page[-1].conversation_key[len(caller.prefix) :]
        tags = [("tag", f"{name}:{value}") for name, value in query.tag]
        link = urlencode([("limit", query.limit), ("after", last), *tags])
        headers.append((b"link", f'</chat-history?{link}>; rel="next"'.encode("ascii")))
    return json_answer(_listing(page, caller.prefix), headers)


def _tag_filter(tags: tuple[tuple[str, str], ...]) -> dict[str, str] | None:
    """The asked tags as a dict; ``None`` when one name is asked for two values (nothing matches)."""
    wanted: dict[str, str] = {}
    for name, value in tags:
        if wanted.setdefault(name, value) != value:
            return None
    return wanted


async def _page(
    store: ChatHistoryStore, caller: Caller, cursor: str | None, limit: int, wanted: dict[str, str]
) -> tuple[list[ConversationSummary], bool]:
    """Up to ``limit`` of the caller's conversations after ``cursor``, and whether more remain: one store call, for
    one more than the page. The store lists only what the caller may see (its namespace's prefix; without API keys,
    the plain keys' index), so other namespaces' conversations cost the page nothing."""
    found = await store.summaries(caller.prefix, after=cursor, limit=limit + 1, tags=wanted, plain=caller.plain)
    if len(found) > limit:
        return found[:limit], True
    return found, False


#: Conversations a whole listing reads, encodes and sends per step. Each step holds the event loop briefly, and its
#: objects are freed before the next: a list of 100,000 built at once held the loop for whole garbage collections.
#: Measured at 100,000 conversations: steps of 1,000 still let a few full collections through (``GET /`` waited up
#: to 124 ms), steps of 256 none (at most 25 ms), and the list took no longer.
LISTING_PIECE = 256


async def _streamed_listing(
    store: ChatHistoryStore, caller: Caller, wanted: dict[str, str], first: tuple[list[ConversationSummary], bool]
) -> AsyncIterator[bytes]:
    """Every conversation of the caller carrying the ``wanted`` tags, from ``first`` (a page already read) on, as one
    JSON list: read from the store a page at a time, each page sent as it is encoded. The bytes are those of one
    encoding of the whole list; a conversation written meanwhile is listed if its key comes after the pages sent."""
    page, more = first
    opening = b"["  # what goes before the next page's rows: the list's start, then a comma
    while True:
        if page:
            yield opening + _listing(page, caller.prefix)[1:-1]
            opening = b","
        if not more:
            break
        page, more = await _page(store, caller, page[-1].conversation_key, LISTING_PIECE, wanted)
    yield b"[]" if opening == b"[" else b"]"


def _listing(summaries: list[ConversationSummary], prefix: str) -> bytes:
    """A page of the caller's summaries (keys under ``prefix``; at most :data:`~.parameters.MAX_PAGE`) as a JSON
    list."""
    return _encode([_summary_row(s, prefix) for s in summaries])


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
    if summary.participants:
        row["participants"] = _participant_rows(summary.participants)
    return row


def _participant_rows(counts: Mapping[str, int]) -> list[dict[str, Any]]:
    """Each author and how many messages it signed, in the one order of :func:`chatlab.authors.ranked`."""
    return [{"authorName": name, "messageCount": count} for name, count in ranked(counts)]


async def get_messages(request: Request) -> Response:
    """``GET /chat-history/{conversationKey}``: the messages, or part of them."""
    return await _read_messages(request, with_body=True)


async def count_messages(request: Request) -> Response:
    """``HEAD /chat-history/{conversationKey}``: what ``GET`` answers, its checks and 400s included, without the
    body (and without ``Content-Length``, which only the body decides)."""
    return await _read_messages(request, with_body=False)


async def _read_messages(request: Request, with_body: bool) -> Response:
    """The answer of ``GET`` (``with_body``) or ``HEAD``: one function, so ``HEAD`` answers exactly as ``GET``."""
    context = context_of(request)
    caller, key = await context.conversation(request)
    query = read_query(MessagesQuery, request, context.keys)
    stored = caller.stored_key(key)
    store = context.store
    if query == _ARTICLES_READ:  # the article's read: no query
        if not with_body:  # the count and version alone, without reading the messages
            part = await store.read_slice(stored, 0, 0)
            return Answer(200, _version_headers(part.version, part.count))
        whole = await store.read_array(stored)
        return json_answer(whole.array, _version_headers(whole.version, whole.count))
    start = query.after or 0
    limit = query.limit
    if query.view == "summary" or query.author is not None:  # a view of the conversation, paged by after and limit
        snapshot = await store.read(stored)
        view = summary_view(snapshot.messages) if query.view == "summary" else snapshot.messages
        if query.author is not None:
            view = by_author(view, query.author)
        messages = view[start : None if limit is None else start + limit]
        total = len(view)
        link_query = _view_query(query)
        headers = _version_headers(snapshot.version, len(snapshot.messages))
    else:
        part = await store.read_slice(stored, start, limit)
        messages = part.messages
        total = part.count
        link_query = ""
        headers = _version_headers(part.version, part.count)
    end = start + len(messages)
    if limit is not None and end < total:
        link = f'<{conversation_path(key)}?{link_query}after={end}&limit={limit}>; rel="next"'
        headers.append((b"link", link.encode("ascii")))
    if not with_body:
        return Answer(200, headers)
    return json_answer(b"[" + b",".join(messages) + b"]", headers)


#: A read without a query: the article's, answered from the stored array as it is.
_ARTICLES_READ = MessagesQuery()


def _view_query(query: MessagesQuery) -> str:
    """The query naming a read's view, for its ``Link`` (``view=summary&author=...&``; empty for the plain read)."""
    names = [("view", query.view)] if query.view is not None else []
    if query.author is not None:
        names.append(("author", query.author))
    return urlencode(names, quote_via=quote) + "&" if names else ""


async def list_participants(request: Request) -> Response:
    """``GET /chat-history/{conversationKey}/participants``: each author and how many messages it signed, as the
    store counted them at write time (the conversation's summary: no message is read)."""
    context = context_of(request)
    caller, key = await context.conversation(request)
    read_query(NoQuery, request, context.keys)
    stored_key = caller.stored_key(key)
    summary = await summary_of(context.store, stored_key) or ConversationSummary(stored_key, 0, ABSENT)
    authors = _participant_rows(summary.participants)
    body = {"conversationKey": key, "messageCount": summary.message_count, "participants": authors}
    return json_answer(_encode(body), _version_headers(summary.version or ABSENT, summary.message_count))


def iso_time(seconds: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC with milliseconds (``2026-04-16T01:30:52.123Z``)."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _version_headers(version: str, count: int) -> list[tuple[bytes, bytes]]:
    """``ETag`` and ``X-Message-Count``: the conversation's version and how many messages it holds."""
    return [(b"etag", etag(version).encode()), (b"x-message-count", str(count).encode())]


async def _conversation_write(
    request: Request, honoured: tuple[str, ...]
) -> tuple[ServiceContext, Caller, str, Conditions]:
    """What a write with a body or none reads first: who calls, which conversation, no query, its conditions."""
    context = context_of(request)
    caller, key = await context.conversation(request)
    read_query(NoQuery, request, context.keys)
    return context, caller, key, read_conditions(request, honoured)


async def append_messages(request: Request) -> Response:
    """``POST /chat-history/{conversationKey}``: append the body's messages."""
    context, caller, key, conditions = await _conversation_write(request, APPEND_CONDITIONS)
    messages = await context.bodies(request)
    idempotency = conditions.idempotency(fingerprint("append", messages), context.idempotency_ttl)
    result = await context.store.append(
        caller.stored_key(key), messages, if_match=conditions.if_match, idempotency=idempotency
    )
    return Answer(202, [*_created_headers(key, result.version, result.replayed), (b"content-length", b"0")])


async def replace_messages(request: Request) -> Response:
    """``PUT /chat-history/{conversationKey}``: make the conversation hold the body's messages."""
    context, caller, key, conditions = await _conversation_write(request, REPLACE_CONDITIONS)
    messages = await context.bodies(request)
    result = await context.store.replace(caller.stored_key(key), messages, if_match=conditions.if_match)
    return Answer(204, [(b"etag", etag(result.version).encode())])


async def delete_conversation(request: Request) -> Response:
    """``DELETE /chat-history/{conversationKey}``: forget the conversation."""
    context, caller, key, conditions = await _conversation_write(request, DELETE_CONDITIONS)
    await context.store.delete(caller.stored_key(key), if_match=conditions.if_match)
    return Answer(204, [])


async def fork_conversation(request: Request) -> Response:
    """``POST /chat-history/{conversationKey}/fork``: a new conversation holding its first messages (:mod:`.forks`)."""
    context = context_of(request)
    caller, key = await context.conversation(request)
    query = read_query(ForkQuery, request, context.keys)
    conditions = read_conditions(request, FORK_CONDITIONS)
    new_key, result = await fork(context, caller, key, query, conditions)
    return Answer(201, [*_created_headers(new_key, result.version, result.replayed), (b"content-length", b"0")])


async def patch_metadata(request: Request) -> Response:
    """``PATCH /chat-history/{conversationKey}``: set the title and tags (a JSON merge patch)."""
    context, caller, key, conditions = await _conversation_write(request, PATCH_CONDITIONS)
    change = decode_metadata_patch(await context.bodies.json_bytes(request))
    summary = await context.store.set_metadata(caller.stored_key(key), change, if_match=conditions.if_match)
    if summary is None:
        raise Refused(404, "there is no such conversation: write its messages first, then set its title and tags")
    return json_response(_summary_row(summary, caller.prefix))


async def empty_key() -> Response:
    """``/chat-history/`` (an empty key) is a bad request, not the listing nor a 404."""
    raise Refused(
        400,
        "the conversation key is empty: use /chat-history/{conversationKey}, or GET /chat-history (no "
        "trailing slash) for the list of conversations",
    )


def _created_headers(key: str, version: str, replayed: bool) -> list[tuple[bytes, bytes]]:
    """``Location`` and ``ETag`` of a write that made or grew a conversation; ``Idempotent-Replayed`` for a retry."""
    headers = [(b"location", conversation_path(key).encode("ascii")), (b"etag", etag(version).encode())]
    if replayed:
        headers.append((b"idempotent-replayed", b"true"))
    return headers


def add_routes(app: FastAPI, store: ChatHistoryStore, settings: ServiceSettings) -> None:
    """Register every endpoint on ``app``, around ``store``, with the OpenAPI description ``settings`` make."""
    context = ServiceContext(store, settings)
    context.install(app)
    docs = _Docs(context, error_docs(settings))
    # the app's own router (its route class: RequestRoute): an included router would be matched as one more level
    router = app.router
    # a conversation's routes first: the router tries routes in order, and they serve nearly every request
    _add_reading_routes(router, docs)
    _add_writing_routes(router, docs)
    router.add_api_route(
        "/",
        service_info,
        methods=["GET"],
        response_model=wire.ServiceInfo,
        responses=docs.errors.common,
        summary="Service name and description",
        dependencies=[Depends(context.caller_dependency)],  # shows the API key scheme in OpenAPI
    )
    router.add_api_route(
        "/chat-history",
        list_conversations,
        methods=["GET"],
        response_model=list[wire.ChatHistorySummary],
        responses={
            200: {"headers": {"Link": LINK_DOC}},
            **docs.errors.common,
            400: problem_doc("An invalid, unknown or repeated `limit`, `after` or `tag`."),
        },
        summary="Stored conversations and their message counts, ordered by key; ?limit=L&after=KEY for a page",
        description="Without parameters, every conversation (the article's request). `limit=L` answers at most L, "
        "with a `Link` header naming the next page while more remain; `after=KEY` starts after that key; "
        "`tag=name:value` (repeatable) keeps the conversations carrying every such tag.",
        openapi_extra=docs.of(ListingQuery, keyed=False),
    )
    router.add_api_route(
        "/chat-history/",
        empty_key,
        methods=["GET", "HEAD", "POST", "PUT", "DELETE"],
        include_in_schema=False,
    )


class _Docs:
    """The OpenAPI pieces the settings decide: the key's rule, the API key scheme, the error answers."""

    def __init__(self, context: ServiceContext, errors: ErrorDocs) -> None:
        self.errors = errors
        self._keys = context.keys
        self._security: dict[str, Any] = {"security": [{"ApiKey": []}]} if context.settings.api_keys else {}

    def of(
        self, query: type[Any], headers: tuple[str, ...] = (), writes: str = "", keyed: bool = True
    ) -> dict[str, Any]:
        """The ``openapi_extra`` of a route: its path key, query and condition headers, and the API key scheme."""
        parameters = [*documented(query, self._keys), *headers_of.documented(headers, writes)]
        if keyed:
            key = {
                "name": "conversationKey",
                "in": "path",
                "required": True,
                "description": f"The conversation; {self._keys.words()}.",
                "schema": self._keys.schema(),
                "example": "286d2f0b7b7a43688ad32556e3610f54",
            }
            parameters.insert(0, key)
        return {"parameters": parameters, **self._security}


def _add_reading_routes(router: APIRouter, docs: _Docs) -> None:
    """``GET`` and ``HEAD`` of one conversation, and who took part in it."""
    router.add_api_route(
        "/chat-history/{conversationKey}",
        get_messages,
        methods=["GET"],
        response_model=list[wire.ChatMessage],
        responses={
            200: {"headers": {"ETag": ETAG_DOC, "X-Message-Count": COUNT_DOC, "Link": LINK_DOC}},
            **docs.errors.keyed,
            400: problem_doc("An invalid conversation key, or an invalid, unknown or repeated query parameter."),
        },
        summary="The messages of a conversation ([] for an unknown key); ?after=N&limit=L for part of it, "
        "?view=summary for the latest summary checkpoint and what follows it, ?author=NAME for one author's",
        description="Without parameters, every message in order (the article's request). `after=N` skips the "
        "first N, `limit=L` returns at most L; the `ETag` and `X-Message-Count` describe the whole conversation "
        "in the same snapshot as the messages returned.",
        openapi_extra=docs.of(MessagesQuery),
    )
    router.add_api_route(
        "/chat-history/{conversationKey}",
        count_messages,
        methods=["HEAD"],
        status_code=200,
        response_class=Response,
        responses={
            200: {
                "description": "No body: what `GET` with the same query answers, without it "
                '(`X-Message-Count: 0` and `ETag: "0"` when the conversation does not exist).',
                "headers": {"ETag": ETAG_DOC, "X-Message-Count": COUNT_DOC, "Link": LINK_DOC},
            },
            **docs.errors.keyed,
            400: problem_doc("What `GET` refuses with the same query."),
        },
        summary="Whether a conversation exists and how many messages it holds, without reading them",
        openapi_extra=docs.of(MessagesQuery),
    )
    router.add_api_route(
        "/chat-history/{conversationKey}/participants",
        list_participants,
        methods=["GET"],
        response_model=wire.ConversationParticipants,
        responses={
            200: {"headers": {"ETag": ETAG_DOC}},
            **docs.errors.keyed,
            400: problem_doc("An invalid conversation key, or any query parameter (this endpoint takes none)."),
        },
        summary="Who took part: each author of the conversation's messages and how many it signed",
        description="Counted from the stored messages' `authorName` (docs/agents.md); an unknown key has none.",
        openapi_extra=docs.of(NoQuery),
    )


def _add_writing_routes(router: APIRouter, docs: _Docs) -> None:
    """``POST``, ``PUT``, ``DELETE``, fork and ``PATCH`` of one conversation."""
    errors = docs.errors
    router.add_api_route(
        "/chat-history/{conversationKey}",
        append_messages,
        methods=["POST"],
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
            **docs.of(NoQuery, APPEND_CONDITIONS, "Append"),
        },
    )
    router.add_api_route(
        "/chat-history/{conversationKey}",
        replace_messages,
        methods=["PUT"],
        status_code=204,
        response_class=Response,
        responses={204: {"description": "Replaced.", "headers": {"ETag": ETAG_DOC}}, **errors.writes},
        summary="Replace a conversation's messages",
        openapi_extra={**body_doc("ReplaceChatMessagesRequest"), **docs.of(NoQuery, REPLACE_CONDITIONS, "Replace")},
    )
    router.add_api_route(
        "/chat-history/{conversationKey}",
        delete_conversation,
        methods=["DELETE"],
        status_code=204,
        response_class=Response,
        responses={
            204: {"description": "Deleted (also when it did not exist, unless `If-Match: *` asks that it does)."},
            **errors.conditional,
        },
        summary="Delete a conversation",
        description="Without `If-Match`, as in the article. With the `ETag` of a GET, only if nobody wrote "
        "meanwhile: a client that read a conversation and decided to delete it never wipes an append it did not see.",
        openapi_extra=docs.of(NoQuery, DELETE_CONDITIONS, "Delete"),
    )
    router.add_api_route(
        "/chat-history/{conversationKey}/fork",
        fork_conversation,
        methods=["POST"],
        status_code=201,
        response_class=Response,
        responses={
            201: {
                "description": "Forked; `Location` names the new conversation.",
                "headers": {
                    "Location": header_doc("`/chat-history/{newConversationKey}`"),
                    "ETag": ETAG_DOC,
                    "Idempotent-Replayed": header_doc(
                        "`true` when this answers a retry of a fork already made.", required=False
                    ),
                },
            },
            **errors.conditional,
            400: problem_doc(
                "An invalid conversation key, header or query parameter, or a made key the key settings refuse "
                "(name the fork's key with `key`)."
            ),
            404: problem_doc("No conversation to fork."),
            409: problem_doc("The fork's key is taken by another conversation (nothing was written)."),
            422: problem_doc("`through` beyond the conversation's messages, or an `Idempotency-Key` used before."),
        },
        summary="Fork a conversation: a new one holding its first N messages (all by default)",
        description="The new conversation's key is the `key` parameter, or chosen by the service. `If-Match` is "
        "the source's version. With an `Idempotency-Key`, a retry answers the same new conversation, whatever "
        "happened since, and copies nothing twice.",
        openapi_extra=docs.of(ForkQuery, FORK_CONDITIONS, "Fork"),
    )
    router.add_api_route(
        "/chat-history/{conversationKey}",
        patch_metadata,
        methods=["PATCH"],
        response_model=wire.ChatHistorySummary,
        responses={
            200: {"description": "The conversation's summary after the change."},
            **errors.writes,
            404: problem_doc("No such conversation."),
            422: problem_doc("The change would leave more tags than a conversation may carry."),
        },
        summary="Set a conversation's title and tags (a JSON merge patch: null removes, what is not named stays)",
        description="Metadata is not part of the conversation's version: its `ETag` stays, and no cached history "
        "is invalidated. `replace` keeps it; `delete` drops it. `If-Match` is the conversation's version.",
        openapi_extra={**body_doc("ConversationMetadataPatch"), **docs.of(NoQuery, PATCH_CONDITIONS, "Change")},
    )
