"""The chat history service: the article's ASP.NET Minimal API as a FastAPI app.

| endpoint                                 | does                                              |
|------------------------------------------|---------------------------------------------------|
| ``GET /``                                | service name and description                      |
| ``GET /chat-history``                    | ``[{"conversationKey", "messageCount"}]`` by key  |
| ``GET /chat-history/{conversationKey}``  | the messages; ``[]`` for an unknown key           |
| ``GET ...?after=N&limit=L``              | the messages after the first N (at most L)        |
| ``HEAD /chat-history/{conversationKey}`` | no body: ``X-Message-Count`` and ``ETag``         |
| ``POST /chat-history/{conversationKey}`` | append ``{"messages": [...]}``; 202 + Location    |
| ``PUT /chat-history/{conversationKey}``  | replace with ``{"messages": [...]}``; 204         |
| ``DELETE /chat-history/{conversationKey}``| forget the conversation; 204                     |

Bodies are read raw and parsed once (:mod:`chatlab.wire`); stored messages are returned
as the bytes the store holds, so reads never re-encode. Every error is a problem JSON
(:mod:`.problems`).

The article's plain requests work unchanged; what it leaves out are options of
:class:`ServiceSettings` (:mod:`.settings`).

A conversation's version (``ETag``) is ``"<generation>.<count>"``: the generation changes
when it is created, replaced or deleted, never on an append. So a client holding the first N
messages of a generation asks for ``?after=N`` and knows from the answer's ``ETag`` whether
those N are still the start (same generation) or it must read everything again
(:mod:`chatlab.history_cache`, which the provider uses).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, Request, Response
from starlette.middleware.cors import CORSMiddleware

from .. import wire
from ..protections.auth import Caller
from ..protections.conditions import etag, fingerprint, parse_idempotency_key, parse_if_match
from ..runner import BackgroundServer
from ..stores import ChatHistoryStore, open_store
from ..stores.base import Idempotency
from .bodies import read_messages
from .direct import Arguments, DirectRoute, direct
from .openapi import COUNT_DOC, ETAG_DOC, LINK_DOC, body_doc, complete_openapi, error_docs, header_doc, problem_doc
from .parameters import After, IdempotencyKey, IfMatch, Limit, parse_header
from .problems import add_error_handlers
from .responses import JSON, json_response
from .settings import KEY_MAX_LENGTH, KEY_PATTERN, ServiceSettings

__all__ = [
    "KEY_MAX_LENGTH",
    "KEY_PATTERN",
    "SERVICE_NAME",
    "ExternalService",
    "ServiceSettings",
    "create_app",
    "ensure_service",
    "start_service",
]

SERVICE_NAME = "chat-history-service"



def create_app(store: ChatHistoryStore | str | None = None, settings: ServiceSettings | None = None) -> FastAPI:
    """Build the service around a store (an instance, or a URL for :func:`chatlab.stores.open_store`).

    A store given by URL (or the default in-memory one) belongs to the app and is closed
    when the app shuts down; a store instance stays the caller's.
    """
    owned = not isinstance(store, ChatHistoryStore)
    the_store = open_store(store) if owned else store  # type: ignore[arg-type]
    limits = settings or ServiceSettings()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if owned:
            await the_store.close()

    app = FastAPI(
        title="Chat history service",
        description="Keeps a list of chat messages (Microsoft.Extensions.AI `ChatMessage` JSON) per conversation key.",
        version="1.0",
        lifespan=lifespan,
    )
    app.state.store = the_store
    app.state.settings = limits
    add_error_handlers(app)
    _add_routes(app, the_store, limits)
    complete_openapi(app, limits)
    if limits.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=limits.cors_origins,
            allow_methods=["GET", "HEAD", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "If-Match", "Idempotency-Key"],
            expose_headers=[
                "ETag", "Location", "Retry-After", "Idempotent-Replayed", "WWW-Authenticate", "X-Message-Count", "Link"
            ],
            allow_credentials=False,
        )
    return app


def _add_routes(app: FastAPI, store: ChatHistoryStore, settings: ServiceSettings) -> None:
    arguments = Arguments(settings)
    caller_of, key_of = arguments.caller, arguments.key
    app.router.route_class = DirectRoute  # the routes below that are marked with direct() read their own arguments
    common, keyed, writes = error_docs(settings)

    @app.get("/", response_model=wire.ServiceInfo, responses=common, summary="Service name and description")
    async def service_info(caller: Caller = caller_of) -> Response:
        return json_response({"service": SERVICE_NAME, "description": store.description})

    @app.get(
        "/chat-history",
        response_model=list[wire.ChatHistorySummary],
        responses=common,
        summary="Stored conversations and their message counts, ordered by key",
    )
    async def list_conversations(caller: Caller = caller_of) -> Response:
        prefix = caller.prefix
        summaries = await store.summaries(prefix)
        return json_response(
            [
                {"conversationKey": s.conversation_key[len(prefix) :], "messageCount": s.message_count}
                for s in summaries
                if s.conversation_key.startswith(prefix)
            ]
        )

    @app.get(
        "/chat-history/{conversationKey}",
        response_model=list[wire.ChatMessage],
        responses={
            200: {"headers": {"ETag": ETAG_DOC, "X-Message-Count": COUNT_DOC, "Link": LINK_DOC}},
            **keyed,
            400: problem_doc("An invalid conversation key, header, `after` or `limit`."),
        },
        summary="The messages of a conversation ([] for an unknown key); ?after=N&limit=L for part of it",
        description="Without parameters, every message in order (the article's request). `after=N` skips the "
        "first N, `limit=L` returns at most L; the `ETag` and `X-Message-Count` describe the whole conversation "
        "in the same snapshot as the messages returned.",
    )
    @direct(arguments.for_read)
    async def get_messages(caller: Caller = caller_of, key: str = key_of, after: After = None, limit: Limit = None) -> Response:
        stored = caller.stored_key(key)
        if after is None and limit is None:
            conversation = await store.read(stored)
            body = b"[" + b",".join(conversation.messages) + b"]"
            headers = {"ETag": etag(conversation.version), "X-Message-Count": str(len(conversation.messages))}
            return Response(body, media_type=JSON, headers=headers)
        part = await store.read_slice(stored, after or 0, limit)
        headers = {"ETag": etag(part.version), "X-Message-Count": str(part.count)}
        end = part.start + len(part.messages)
        if limit is not None and end < part.count:
            headers["Link"] = f'</chat-history/{key}?after={end}&limit={limit}>; rel="next"'
        return Response(b"[" + b",".join(part.messages) + b"]", media_type=JSON, headers=headers)

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
            **keyed,
        },
        summary="Whether a conversation exists and how many messages it holds, without reading them",
    )
    @direct(arguments.caller_and_key)
    async def count_messages(caller: Caller = caller_of, key: str = key_of) -> Response:
        part = await store.read_slice(caller.stored_key(key), 0, 0)
        response = Response(headers={"ETag": etag(part.version), "X-Message-Count": str(part.count)})
        del response.headers["content-length"]  # not 0: a GET's body would not be empty
        return response

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
            **writes,
            422: problem_doc("The `Idempotency-Key` was used before with other messages."),
        },
        summary="Append messages to a conversation",
        openapi_extra=body_doc("AppendChatMessagesRequest"),
    )
    @direct(arguments.for_append)
    async def append_messages(
        request: Request, caller: Caller = caller_of, key: str = key_of, if_match: IfMatch = None, idempotency_key: IdempotencyKey = None
    ) -> Response:
        condition = parse_header(parse_if_match, if_match)
        idem_key = parse_header(parse_idempotency_key, idempotency_key)
        messages = await read_messages(request, settings)
        idempotency = (
            Idempotency(idem_key, fingerprint("append", messages), settings.idempotency_ttl)
            if idem_key is not None
            else None
        )
        result = await store.append(caller.stored_key(key), messages, if_match=condition, idempotency=idempotency)
        headers = {"Location": f"/chat-history/{key}", "ETag": etag(result.version)}
        if result.replayed:
            headers["Idempotent-Replayed"] = "true"
        return Response(status_code=202, headers=headers)

    @app.put(
        "/chat-history/{conversationKey}",
        status_code=204,
        response_class=Response,
        responses={204: {"description": "Replaced.", "headers": {"ETag": ETAG_DOC}}, **writes},
        summary="Replace a conversation's messages",
        openapi_extra=body_doc("ReplaceChatMessagesRequest"),
    )
    @direct(arguments.for_replace)
    async def replace_messages(
        request: Request, caller: Caller = caller_of, key: str = key_of, if_match: IfMatch = None
    ) -> Response:
        condition = parse_header(parse_if_match, if_match)
        messages = await read_messages(request, settings)
        result = await store.replace(caller.stored_key(key), messages, if_match=condition)
        return Response(status_code=204, headers={"ETag": etag(result.version)})

    @app.delete(
        "/chat-history/{conversationKey}",
        status_code=204,
        response_class=Response,
        responses={204: {"description": "Deleted (also when it did not exist)."}, **keyed},
        summary="Delete a conversation",
    )
    @direct(arguments.caller_and_key)
    async def delete_conversation(caller: Caller = caller_of, key: str = key_of) -> Response:
        await store.delete(caller.stored_key(key))
        return Response(status_code=204)


def start_service(
    host: str = "127.0.0.1",
    port: int = 0,
    store: ChatHistoryStore | str | None = None,
    settings: ServiceSettings | None = None,
    log_level: str = "warning",
    *,
    tls_cert: str | os.PathLike[str] | None = None,
    tls_key: str | os.PathLike[str] | None = None,
) -> BackgroundServer:
    """Start the service in a background thread (as the article's separately started server).

    Returns the running :class:`~chatlab.runner.BackgroundServer` (``.url``, ``.stop()``).
    Calling it again with the same host and port returns the server already running, so
    a notebook cell can be re-run. ``tls_cert``/``tls_key`` (PEM files) serve HTTPS.
    """
    return BackgroundServer.ensure(
        lambda: create_app(store, settings),
        name=SERVICE_NAME,
        host=host,
        port=port,
        log_level=log_level,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
    )


@dataclass(frozen=True)
class ExternalService:
    """A chat history service started elsewhere (``CHAT_HISTORY_SERVICE_URL``); stopping it is not ours to do."""

    url: str

    def stop(self) -> None:
        """Nothing to stop: the service belongs to whoever started it."""

    def __repr__(self) -> str:
        return f"<ExternalService {self.url}>"


def ensure_service(port: int = 0, store: ChatHistoryStore | str | None = None) -> BackgroundServer | ExternalService:
    """The service the notebooks use: the one ``CHAT_HISTORY_SERVICE_URL`` names, else one started here.

    Prints which, so a reader always knows where the history goes.
    """
    url = os.environ.get("CHAT_HISTORY_SERVICE_URL")
    if url:
        print(f"Chat history service: {url} (from CHAT_HISTORY_SERVICE_URL)")
        return ExternalService(url.rstrip("/"))
    server = start_service(port=port, store=store)
    print(f"Chat history service: {server.url} (started in a background thread of this process)")
    return server
