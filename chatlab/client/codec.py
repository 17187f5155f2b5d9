"""Convert MAF ``Message``/``Content`` to and from the article's MEAI ``ChatMessage`` JSON, losslessly.

The service speaks the JSON .NET's Microsoft.Extensions.AI writes, so a C# client and a Python agent can share a
conversation; this module is the only place that knows both shapes. Lossless both ways: a converter maps the shared
fields, converts the result back, and records whatever did not survive in the target's additional properties
(:mod:`.extras`: MAF-only data under ``additionalProperties["chatlab.maf"]`` in the JSON, MEAI-only data under
``additional_properties["chatlab.meai"]`` on the MAF side). So ``decode(encode(m)) == m`` and
``encode(decode(j)) == j``; the two keys are reserved.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agent_framework import Content, Message

from ..vocabulary import CONTENT_KINDS
from .errors import ChatHistoryCodecError
from .extras import (
    MAF_EXTRA_KEY,
    MEAI_EXTRA_KEY,
    drop_empty_ap,
    maf_diff,
    meai_diff,
    overlay_meai_extra,
    split_extra,
    with_ap_key,
)

__all__ = [
    "MAF_EXTRA_KEY",
    "MEAI_EXTRA_KEY",
    "content_from_meai",
    "content_to_meai",
    "message_from_meai",
    "message_to_meai",
    "messages_from_meai",
    "messages_to_meai",
]

# MAF content type <-> MEAI "$type", for the kinds the codec converts field by field (vocabulary.CONTENT_KINDS).
_MAF_TO_MEAI_TYPE = {k.maf: k.meai for k in CONTENT_KINDS if k.maf is not None and k.meai is not None}
_MEAI_TO_MAF_TYPE = {v: k for k, v in _MAF_TO_MEAI_TYPE.items()}

# MEAI UsageDetails <-> MAF UsageDetails
_USAGE_KEYS = {
    "inputTokenCount": "input_token_count",
    "outputTokenCount": "output_token_count",
    "totalTokenCount": "total_token_count",
    "cachedInputTokenCount": "cache_read_input_token_count",
    "reasoningTokenCount": "reasoning_output_token_count",
}
_USAGE_KEYS_BACK = {v: k for k, v in _USAGE_KEYS.items()}

_CARRIER = "text"  # what a content type the other side lacks travels as (an empty text)


# --------------------------------------------------------------------------- public API


def messages_to_meai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """MAF messages as a list of MEAI ``ChatMessage`` JSON objects."""
    return [message_to_meai(m) for m in messages]


def messages_from_meai(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """MEAI ``ChatMessage`` JSON objects as MAF messages."""
    return [message_from_meai(item) for item in items]


def message_to_meai(message: Message) -> dict[str, Any]:
    """One MAF message as MEAI ``ChatMessage`` JSON (keys in the order .NET writes them)."""
    contents = [content_to_meai(c) for c in message.contents]
    raw = _encode_message_raw(message, contents)
    target = _maf_message_fields(message)
    extra = maf_diff(target, _maf_message_fields(_decode_message_full(raw, contents_of=message.contents)))
    if extra:
        raw = drop_empty_ap(raw)
        extra = maf_diff(target, _maf_message_fields(_decode_message_full(raw, contents_of=message.contents)))
        raw = with_ap_key(raw, MAF_EXTRA_KEY, extra)
    _check_json(raw)
    return raw


def message_from_meai(item: Mapping[str, Any]) -> Message:
    """One MEAI ``ChatMessage`` JSON object as a MAF message."""
    if not isinstance(item, Mapping):
        raise ChatHistoryCodecError(f"a chat message must be a JSON object, got {type(item).__name__}")
    contents_json = item.get("contents") or []
    if not isinstance(contents_json, list):
        raise ChatHistoryCodecError("'contents' of a chat message must be a JSON array")
    contents = [content_from_meai(c) for c in contents_json]
    j0, maf_extra = split_extra(item)
    message = _decode_message_full(j0, contents_of=contents)
    if maf_extra:
        message = _apply_maf_message_extra(message, maf_extra)
    return message


def content_to_meai(content: Content) -> dict[str, Any]:
    """One MAF content as an MEAI ``AIContent`` JSON object, ``$type`` first."""
    raw = _encode_raw(content)
    target = content.to_dict()
    extra = maf_diff(target, _decode_full(raw).to_dict())
    if extra:
        raw = drop_empty_ap(raw)
        extra = maf_diff(target, _decode_full(raw).to_dict())
        raw = with_ap_key(raw, MAF_EXTRA_KEY, extra)
    return raw


def content_from_meai(item: Mapping[str, Any]) -> Content:
    """One MEAI ``AIContent`` JSON object as a MAF content."""
    if not isinstance(item, Mapping):
        raise ChatHistoryCodecError(f"a content item must be a JSON object, got {type(item).__name__}")
    j0, maf_extra = split_extra(item)
    content = _decode_full(j0)
    if maf_extra:
        content = Content.from_dict({**content.to_dict(), **maf_extra})
    return content


# --------------------------------------------------------------------------- contents: raw mapping


def _encode_raw(content: Content) -> dict[str, Any]:
    """The fields both sides share, MEAI-shaped; then the MEAI-only fields recorded on ``content``."""
    meai_type = _MAF_TO_MEAI_TYPE.get(content.type)
    out: dict[str, Any] = {"$type": meai_type or _CARRIER}
    t = content.type
    if meai_type is None:
        out["text"] = ""
    elif t == "text":
        out["text"] = content.text
    elif t == "text_reasoning":
        _put(out, "text", content.text)
        _put(out, "protectedData", content.protected_data)
    elif t == "data":
        _put(out, "uri", content.uri)
        _put(out, "name", content.name)
    elif t == "uri":
        _put(out, "uri", content.uri)
        _put(out, "mediaType", content.media_type)
    elif t == "error":
        _put(out, "message", content.message)
        _put(out, "errorCode", content.error_code)
        _put(out, "details", content.error_details)
    elif t == "usage":
        _put(out, "details", _usage_to_meai(content.usage_details))
    elif t == "function_call":
        _put(out, "name", content.name)
        _put(out, "arguments", _arguments_to_meai(content.arguments))
        if content.informational_only:
            out["informationalOnly"] = True
        _put(out, "callId", content.call_id)
    elif t == "function_result":
        _put(out, "result", content.result)
        _put(out, "callId", content.call_id)
    elif t == "hosted_file":
        _put(out, "fileId", content.file_id)
        _put(out, "mediaType", content.media_type)
        _put(out, "name", content.name)
    elif t == "hosted_vector_store":
        _put(out, "vectorStoreId", content.vector_store_id)
    ap = {k: v for k, v in content.additional_properties.items() if k != MEAI_EXTRA_KEY}
    if ap:
        out["additionalProperties"] = ap
    return overlay_meai_extra(out, content.additional_properties.get(MEAI_EXTRA_KEY))


def _decode_raw(item: Mapping[str, Any]) -> Content:
    """The fields both sides share, MAF-shaped; everything else is left to the diff."""
    meai_type = item.get("$type")
    # Any: the vocabulary names MAF types as plain text (it imports no framework); they are ContentType values
    t: Any = _MEAI_TO_MAF_TYPE.get(meai_type) if isinstance(meai_type, str) else None
    ap = item.get("additionalProperties")
    fields: dict[str, Any] = {"additional_properties": dict(ap) if isinstance(ap, Mapping) else {}}
    if t is None:
        return Content("text", text="", **fields)
    get = item.get
    if t == "text":
        fields["text"] = _str(get("text"))
    elif t == "text_reasoning":
        fields.update(text=_str(get("text")), protected_data=_str(get("protectedData")))
    elif t == "data":
        uri = _str(get("uri"))
        fields.update(uri=uri, media_type=_data_uri_media_type(uri), name=_str(get("name")))
    elif t == "uri":
        fields.update(uri=_str(get("uri")), media_type=_str(get("mediaType")))
    elif t == "error":
        fields.update(
            message=_str(get("message")), error_code=_str(get("errorCode")), error_details=_str(get("details"))
        )
    elif t == "usage":
        fields["usage_details"] = _usage_from_meai(get("details"))
    elif t == "function_call":
        args = get("arguments")
        fields.update(
            call_id=_str(get("callId")),
            name=_str(get("name")),
            arguments=dict(args) if isinstance(args, Mapping) else None,
            informational_only=get("informationalOnly") is True,
            hosted=False,
        )
    elif t == "function_result":
        result = get("result")
        fields.update(call_id=_str(get("callId")), result=result, items=_result_items(result))
    elif t == "hosted_file":
        fields.update(file_id=_str(get("fileId")), media_type=_str(get("mediaType")), name=_str(get("name")))
    elif t == "hosted_vector_store":
        fields["vector_store_id"] = _str(get("vectorStoreId"))
    return Content(t, **fields)


def _decode_full(item: Mapping[str, Any]) -> Content:
    """``_decode_raw`` plus, under ``chatlab.meai``, whatever of ``item`` it could not express."""
    content = _decode_raw(item)
    extra = meai_diff(item, _encode_raw(content))
    if extra:
        content.additional_properties[MEAI_EXTRA_KEY] = extra
    return content


# --------------------------------------------------------------------------- messages: raw mapping


def _encode_message_raw(message: Message, contents: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _put(out, "authorName", message.author_name)
    out["role"] = message.role
    out["contents"] = contents
    _put(out, "messageId", message.message_id)
    ap = {k: v for k, v in message.additional_properties.items() if k != MEAI_EXTRA_KEY}
    if ap:
        out["additionalProperties"] = ap
    return overlay_meai_extra(out, message.additional_properties.get(MEAI_EXTRA_KEY))


def _decode_message_full(item: Mapping[str, Any], *, contents_of: list[Content]) -> Message:
    """Message fields from ``item`` (contents given separately), MEAI-only fields under ``chatlab.meai``."""
    ap = item.get("additionalProperties")
    role = item.get("role")
    message = Message(
        role if isinstance(role, str) else "user",
        list(contents_of),
        author_name=_str(item.get("authorName")),
        message_id=_str(item.get("messageId")),
        additional_properties=dict(ap) if isinstance(ap, Mapping) else {},
    )
    back = _encode_message_raw(message, list(item.get("contents") or []))
    extra = meai_diff(item, back, skip=("contents",))
    if extra:
        message.additional_properties[MEAI_EXTRA_KEY] = extra
    return message


def _maf_message_fields(message: Message) -> dict[str, Any]:
    """The message's ``to_dict`` without its contents (not serialized only to be dropped: most of the cost)."""
    return message.to_dict(exclude={"contents"})


def _apply_maf_message_extra(message: Message, extra: Mapping[str, Any]) -> Message:
    fields = {**_maf_message_fields(message), **extra}
    return Message(
        fields.get("role") or message.role,
        message.contents,
        author_name=fields.get("author_name"),
        message_id=fields.get("message_id"),
        additional_properties=fields.get("additional_properties") or {},
    )


# --------------------------------------------------------------------------- field helpers


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _arguments_to_meai(arguments: Any) -> dict[str, Any] | None:
    """MEAI wants an object; MAF may hold the model's JSON text (kept verbatim by the diff)."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _result_items(result: Any) -> list[Content]:
    """The ``items`` MAF derives from a function result, as ``Content.from_function_result`` does."""
    return list(Content.from_function_result("_", result=result).items or [])


def _data_uri_media_type(uri: str | None) -> str | None:
    if not uri or not uri.startswith("data:"):
        return None
    head = uri[5:].split(",", 1)[0]
    media_type = head.split(";", 1)[0]
    return media_type or None


def _usage_to_meai(usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    out: dict[str, Any] = {}
    additional: dict[str, Any] = {}
    for k, v in usage.items():
        if k in _USAGE_KEYS_BACK:
            _put(out, _USAGE_KEYS_BACK[k], v)
        elif v is not None:
            additional[k] = v
    if additional:
        out["additionalCounts"] = additional
    return out


def _usage_from_meai(details: Any) -> dict[str, Any] | None:
    if not isinstance(details, Mapping):
        return None
    usage: dict[str, Any] = {}
    counts = details.get("additionalCounts")
    if isinstance(counts, Mapping):
        usage.update({k: v for k, v in counts.items() if k not in _USAGE_KEYS_BACK})
    for meai_key, maf_key in _USAGE_KEYS.items():
        if details.get(meai_key) is not None:
            usage[maf_key] = details[meai_key]
    return usage


def _check_json(item: dict[str, Any]) -> None:
    try:
        json.dumps(item, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ChatHistoryCodecError(
            f"a message cannot be written as JSON ({exc}); additional properties must hold JSON values only"
        ) from exc
