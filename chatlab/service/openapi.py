"""The OpenAPI description completed where FastAPI cannot know: response headers, the error answers the settings
make possible, the request bodies (parsed by hand, :mod:`.bodies`), errors as problem JSON, 400 instead of 422."""

from __future__ import annotations

from typing import Any, NamedTuple

from fastapi import FastAPI
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from . import schema as wire
from .problems import PROBLEM_JSON
from .responses import JSON
from .settings import ServiceSettings

Responses = dict[int | str, dict[str, Any]]


def header_doc(description: str, required: bool = True) -> dict[str, Any]:
    """A response header, and what it says."""
    return {"description": description, "required": required, "schema": {"type": "string"}}


ETAG_DOC = header_doc(
    'The conversation\'s version, for `If-Match`: `"<generation>.<count>"`, where the generation changes when '
    'the conversation is created, replaced or deleted and never on an append (`"0"`: it does not exist).'
)
COUNT_DOC = header_doc("How many messages the whole conversation holds (0 for an unknown key).")
LINK_DOC = header_doc(
    'With `limit`, when more messages follow: `</chat-history/{conversationKey}?after=M&limit=L>; rel="next"`.',
    required=False,
)


def problem_doc(description: str, **more: Any) -> dict[str, Any]:
    """An error answer: a problem JSON body, and why it is given."""
    return {"model": wire.Problem, "description": description, **more}


def body_doc(model_name: str) -> dict[str, Any]:
    """The request body a write endpoint parses by hand, which FastAPI therefore does not see."""
    ref = {"$ref": f"#/components/schemas/{model_name}"}
    return {"requestBody": {"required": True, "content": {JSON: {"schema": ref}}}}


class ErrorDocs(NamedTuple):
    """The error answers of each kind of endpoint."""

    common: Responses  # every endpoint
    keyed: Responses  # an endpoint of one conversation
    conditional: Responses  # an endpoint of one conversation that takes If-Match
    writes: Responses  # an endpoint that writes a body to one conversation


def error_docs(settings: ServiceSettings) -> ErrorDocs:
    """The error answers each kind of endpoint can give with these settings (401 only with keys, 429 with a limit)."""
    common: Responses = {
        421: problem_doc("The `Host` is not a name this service serves (`--allowed-host`)."),
        503: problem_doc(
            "The store failed or did not answer within `store_timeout`; retry later.",
            headers={"Retry-After": header_doc("Seconds to wait before retrying.")},
        ),
    }
    if settings.api_keys is not None:
        common[401] = problem_doc(
            "No API key, or not a valid one.",
            headers={"WWW-Authenticate": header_doc('`Bearer realm="chat-history"`')},
        )
    if settings.rate_limit is not None:
        common[429] = problem_doc(
            "Over the rate limit.", headers={"Retry-After": header_doc("Seconds until a request is allowed again.")}
        )
    keyed = {**common, 400: problem_doc("An invalid conversation key or header, or an unknown query parameter.")}
    conditional = {
        **keyed,
        412: problem_doc(
            "`If-Match` did not hold: the conversation changed (nothing was written).", headers={"ETag": ETAG_DOC}
        ),
    }
    writes = {
        **conditional,
        400: problem_doc("An invalid body, conversation key or header, or an unknown query parameter."),
        408: problem_doc("The body did not arrive within `body_timeout` (the connection is closed)."),
        413: problem_doc("Over a size limit (body, messages per request, message size)."),
        415: problem_doc("The body is not JSON: send `Content-Type: application/json`."),
    }
    return ErrorDocs(common, keyed, conditional, writes)


def complete_openapi(app: FastAPI, settings: ServiceSettings) -> None:
    """Make OpenAPI say what the service does: bodies are parsed by hand, errors are problem JSON, 400 not 422."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        # the write bodies' schemas (with the configured maxItems), in place of FastAPI's validation errors
        mode: JsonSchemaMode = "validation"
        bodies = (wire.AppendChatMessagesRequest, wire.ReplaceChatMessagesRequest, wire.ConversationMetadataPatch)
        _, defs = models_json_schema([(model, mode) for model in bodies], ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(defs["$defs"])
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        for name in ("AppendChatMessagesRequest", "ReplaceChatMessagesRequest"):
            components[name]["properties"]["messages"]["maxItems"] = settings.max_messages
        for operation in (op for path in schema["paths"].values() for op in path.values()):
            responses = operation["responses"]
            # no FastAPI validation 422 (an invalid parameter is a 400), every error as problem JSON
            if "HTTPValidationError" in str(responses.get("422", "")):
                responses.pop("422")
            for status, response in responses.items():
                if status >= "400" and JSON in response.get("content", {}):
                    response["content"] = {PROBLEM_JSON: response["content"].pop(JSON)}
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend its schema
