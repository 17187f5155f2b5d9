"""The chat history service: the article's ASP.NET Minimal API as a FastAPI app.

| endpoint                                 | does                                              |
|------------------------------------------|---------------------------------------------------|
| ``GET /``                                | service name and description                      |
| ``GET /chat-history``                    | ``[{"conversationKey", "messageCount"}]`` by key  |
| ``GET /chat-history/{conversationKey}``  | the messages; ``[]`` for an unknown key           |
| ``POST /chat-history/{conversationKey}`` | append ``{"messages": [...]}``; 202 + Location    |
| ``PUT /chat-history/{conversationKey}``  | replace with ``{"messages": [...]}``; 204         |
| ``DELETE /chat-history/{conversationKey}``| forget the conversation; 204                     |

Bodies are read raw and parsed once (:mod:`chatlab.wire`); stored messages are returned
as the bytes the store holds, so reads never re-encode. Every error is an RFC 9457
problem JSON with a ``detail`` that says what to do.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import FastAPI, Path, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException

from . import wire
from .runner import BackgroundServer
from .stores import ChatHistoryStore, StoreError, open_store

SERVICE_NAME = "chat-history-service"
KEY_PATTERN = r"^[A-Za-z0-9_-]+$"
KEY_MAX_LENGTH = 128
_KEY_RE = re.compile(KEY_PATTERN)
_JSON = "application/json"
_PROBLEM = "application/problem+json"


@dataclass(frozen=True)
class ServiceSettings:
    """Limits on what one request may carry; defaults come from the environment.

    ``CHATLAB_MAX_BODY_BYTES`` (8 MiB) and ``CHATLAB_MAX_MESSAGES`` (10,000 per request).
    """

    max_body_bytes: int = field(default_factory=lambda: int(os.environ.get("CHATLAB_MAX_BODY_BYTES", 8 * 1024 * 1024)))
    max_messages: int = field(default_factory=lambda: int(os.environ.get("CHATLAB_MAX_MESSAGES", 10_000)))


ConversationKey = Annotated[
    str,
    Path(
        alias="conversationKey",
        pattern=KEY_PATTERN,
        max_length=KEY_MAX_LENGTH,
        description=f"Letters, digits, '_' and '-', 1 to {KEY_MAX_LENGTH} characters (a GUID in 'N' format fits).",
        examples=["286d2f0b7b7a43688ad32556e3610f54"],
    ),
]


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
    _add_error_handlers(app)
    _add_routes(app, the_store, limits)
    _complete_openapi(app)
    return app


def _add_routes(app: FastAPI, store: ChatHistoryStore, limits: ServiceSettings) -> None:
    errors = {400: {"model": wire.Problem}, 413: {"model": wire.Problem}, 503: {"model": wire.Problem}}
    read_errors = {400: errors[400], 503: errors[503]}

    @app.get("/", response_model=wire.ServiceInfo, summary="Service name and description")
    async def service_info() -> Response:
        return _json({"service": SERVICE_NAME, "description": store.description})

    @app.get(
        "/chat-history",
        response_model=list[wire.ChatHistorySummary],
        responses={503: errors[503]},
        summary="Stored conversations and their message counts, ordered by key",
    )
    async def list_conversations() -> Response:
        summaries = await store.summaries()
        return _json([{"conversationKey": s.conversation_key, "messageCount": s.message_count} for s in summaries])

    @app.get(
        "/chat-history/{conversationKey}",
        response_model=list[wire.ChatMessage],
        responses=read_errors,
        summary="The messages of a conversation ([] for an unknown key)",
    )
    async def get_messages(key: ConversationKey) -> Response:
        messages = await store.get(key)
        return Response(b"[" + b",".join(messages) + b"]", media_type=_JSON)

    @app.post(
        "/chat-history/{conversationKey}",
        status_code=202,
        response_class=Response,
        responses={202: {"description": "Appended; `Location` names the conversation."}, **errors},
        summary="Append messages to a conversation",
        openapi_extra=_body_doc("AppendChatMessagesRequest"),
    )
    async def append_messages(key: ConversationKey, request: Request) -> Response:
        messages = wire.decode_messages_body(await _read_body(request, limits), max_messages=limits.max_messages)
        await store.append(key, messages)
        return Response(status_code=202, headers={"Location": f"/chat-history/{key}"})

    @app.put(
        "/chat-history/{conversationKey}",
        status_code=204,
        response_class=Response,
        responses={204: {"description": "Replaced."}, **errors},
        summary="Replace a conversation's messages",
        openapi_extra=_body_doc("ReplaceChatMessagesRequest"),
    )
    async def replace_messages(key: ConversationKey, request: Request) -> Response:
        messages = wire.decode_messages_body(await _read_body(request, limits), max_messages=limits.max_messages)
        await store.replace(key, messages)
        return Response(status_code=204)

    @app.delete(
        "/chat-history/{conversationKey}",
        status_code=204,
        response_class=Response,
        responses={204: {"description": "Deleted (also when it did not exist)."}, **read_errors},
        summary="Delete a conversation",
    )
    async def delete_conversation(key: ConversationKey) -> Response:
        await store.delete(key)
        return Response(status_code=204)


async def _read_body(request: Request, limits: ServiceSettings) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed the limit."""
    too_large = wire.BadRequest(
        413, f"the body is larger than {limits.max_body_bytes} bytes: send fewer or smaller messages per request"
    )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _json(value: Any) -> Response:
    return Response(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(), media_type=_JSON)


def _problem(status: int, title: str, detail: str, errors: list[dict[str, Any]] | None = None) -> Response:
    body: dict[str, Any] = {"title": title, "status": status, "detail": detail}
    if errors:
        body["errors"] = errors
    response = _json(body)
    response.status_code = status
    response.headers["content-type"] = _PROBLEM
    return response


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(wire.BadRequest)
    async def bad_request(_: Request, exc: wire.BadRequest) -> Response:
        title = "Content Too Large" if exc.status == 413 else "Bad Request"
        return _problem(exc.status, title, exc.detail, exc.errors)

    @app.exception_handler(RequestValidationError)
    async def invalid_parameter(_: Request, exc: RequestValidationError) -> Response:
        if any(tuple(e["loc"][:2]) == ("path", "conversationKey") for e in exc.errors()):
            detail = (
                f"invalid conversationKey: use 1 to {KEY_MAX_LENGTH} letters, digits, '_' or '-' "
                "(for example a GUID without dashes)"
            )
        else:
            detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return _problem(400, "Bad Request", detail)

    @app.exception_handler(StoreError)
    async def store_unavailable(_: Request, exc: StoreError) -> Response:
        return _problem(503, "Service Unavailable", f"the history store failed: {exc}; retry later")

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> Response:
        response = _problem(exc.status_code, str(exc.detail), _http_hint(exc.status_code))
        response.headers.update(exc.headers or {})
        return response


def _http_hint(status: int) -> str:
    if status == 404:
        return "no such endpoint: see GET /docs for the API (/, /chat-history, /chat-history/{conversationKey})"
    if status == 405:
        return "this endpoint does not accept that method: see GET /docs"
    return "see GET /docs for the API"


def _body_doc(model_name: str) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{model_name}"}
    return {"requestBody": {"required": True, "content": {_JSON: {"schema": ref}}}}


def _complete_openapi(app: FastAPI) -> None:
    """Make OpenAPI say what the service does: bodies are parsed by hand, errors are problem JSON, 400 not 422."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        models = [(wire.AppendChatMessagesRequest, "validation"), (wire.ReplaceChatMessagesRequest, "validation")]
        _, defs = models_json_schema(models, ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(defs["$defs"])
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        for operation in (op for path in schema["paths"].values() for op in path.values()):
            operation["responses"].pop("422", None)
            for status, response in operation["responses"].items():
                if status >= "400" and _JSON in response.get("content", {}):
                    response["content"] = {_PROBLEM: response["content"].pop(_JSON)}
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def start_service(
    host: str = "127.0.0.1",
    port: int = 0,
    store: ChatHistoryStore | str | None = None,
    settings: ServiceSettings | None = None,
    log_level: str = "warning",
) -> BackgroundServer:
    """Start the service in a background thread (as the article's separately started server).

    Returns the running :class:`~chatlab.runner.BackgroundServer` (``.url``, ``.stop()``).
    Calling it again with the same host and port returns the server already running, so
    a notebook cell can be re-run.
    """
    return BackgroundServer.ensure(
        lambda: create_app(store, settings), name=SERVICE_NAME, host=host, port=port, log_level=log_level
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
