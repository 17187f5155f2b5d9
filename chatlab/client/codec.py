"""Convert MAF ``Message``/``Content`` to and from the article's MEAI ``ChatMessage`` JSON, losslessly.

The only place that knows both shapes. A converter maps the shared fields, converts the result back, and records what
did not survive in the target's additional properties: MAF-only data under ``"chatlab.maf"`` in the JSON, MEAI-only
data (and keys the converter adds, under ``"$absent"``) under ``"chatlab.meai"`` on the MAF side. So
``decode(encode(m)) == m`` and ``encode(decode(j)) == j``; the two keys are reserved.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agent_framework import Content, Message

from ..vocabulary import CONTENT_KINDS
from .errors import ChatHistoryCodecError

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

MAF_EXTRA_KEY = "chatlab.maf"
"""Key in a JSON ``additionalProperties`` holding MAF fields MEAI has no place for."""
MEAI_EXTRA_KEY = "chatlab.meai"
"""Key in a MAF ``additional_properties`` holding MEAI fields MAF has no place for."""
_ABSENT = "$absent"  # inside MEAI_EXTRA_KEY: keys the raw encoder writes but the original JSON lacked

_CARRIER = "text"  # what a content type the other side lacks travels as (an empty text)


def messages_to_meai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """MAF messages as a list of MEAI ``ChatMessage`` JSON objects."""
    return [message_to_meai(m) for m in messages]


def messages_from_meai(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """MEAI ``ChatMessage`` JSON objects as MAF messages."""
    return [message_from_meai(item) for item in items]


def message_to_meai(message: Message) -> dict[str, Any]:
    """One MAF message as MEAI ``ChatMessage`` JSON (keys in the order .NET writes them)."""
    raw = _encode_message_raw(message, [content_to_meai(c) for c in message.contents])
    skip = {"contents"}  # MAF fields compared without the contents (serialized only to be dropped: most of the cost)
    raw = _carry_maf(
        raw,
        message.to_dict(exclude=skip),
        lambda item: _decode_message_full(item, contents_of=message.contents).to_dict(exclude=skip),
    )
    try:
        json.dumps(raw, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ChatHistoryCodecError(
            f"a message cannot be written as JSON ({exc}); additional properties must hold JSON values only"
        ) from exc
    return raw


def message_from_meai(item: Mapping[str, Any]) -> Message:
    """One MEAI ``ChatMessage`` JSON object as a MAF message."""
    if not isinstance(item, Mapping):
        raise ChatHistoryCodecError(f"a chat message must be a JSON object, got {type(item).__name__}")
    contents_json = item.get("contents") or []
    if not isinstance(contents_json, list):
        raise ChatHistoryCodecError("'contents' of a chat message must be a JSON array")
    contents = [content_from_meai(c) for c in contents_json]
    j0, maf_extra = _split_extra(item)
    message = _decode_message_full(j0, contents_of=contents)
    if maf_extra:
        fields = {**message.to_dict(exclude={"contents"}), **maf_extra}
        message = Message(
            fields.get("role") or message.role,
            message.contents,
            author_name=fields.get("author_name"),
            message_id=fields.get("message_id"),
            additional_properties=fields.get("additional_properties") or {},
        )
    return message


def content_to_meai(content: Content) -> dict[str, Any]:
    """One MAF content as an MEAI ``AIContent`` JSON object, ``$type`` first."""
    return _carry_maf(_encode_raw(content), content.to_dict(), lambda item: _decode_full(item).to_dict())


def content_from_meai(item: Mapping[str, Any]) -> Content:
    """One MEAI ``AIContent`` JSON object as a MAF content."""
    if not isinstance(item, Mapping):
        raise ChatHistoryCodecError(f"a content item must be a JSON object, got {type(item).__name__}")
    j0, maf_extra = _split_extra(item)
    content = _decode_full(j0)
    if maf_extra:
        content = Content.from_dict({**content.to_dict(), **maf_extra})
    return content


# The fields both sides share, per MAF content type: (MAF attribute, MEAI key), in the order .NET writes them.
_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "text": (("text", "text"),),
    "text_reasoning": (("text", "text"), ("protected_data", "protectedData")),
    "data": (("uri", "uri"), ("name", "name")),
    "uri": (("uri", "uri"), ("media_type", "mediaType")),
    "error": (("message", "message"), ("error_code", "errorCode"), ("error_details", "details")),
    "usage": (("usage_details", "details"),),
    "function_call": (
        ("name", "name"),
        ("arguments", "arguments"),
        ("informational_only", "informationalOnly"),
        ("call_id", "callId"),
    ),
    "function_result": (("result", "result"), ("call_id", "callId")),
    "hosted_file": (("file_id", "fileId"), ("media_type", "mediaType"), ("name", "name")),
    "hosted_vector_store": (("vector_store_id", "vectorStoreId"),),
}


def _encode_raw(content: Content) -> dict[str, Any]:
    """The fields both sides share, MEAI-shaped; then the MEAI-only fields recorded on ``content``."""
    meai_type = _MAF_TO_MEAI_TYPE.get(content.type)
    out: dict[str, Any] = {"$type": meai_type or _CARRIER}
    if meai_type is None:
        out["text"] = ""
    for attribute, key in _FIELDS.get(content.type, ()):
        value = _to_meai(attribute, getattr(content, attribute))
        if value is not None or content.type == "text":  # a text always has its text
            out[key] = value
    return _with_properties(out, content.additional_properties)


def _decode_raw(item: Mapping[str, Any]) -> Content:
    """The fields both sides share, MAF-shaped; everything else is left to the diff."""
    meai_type = item.get("$type")
    # Any: the vocabulary names MAF types as plain text (it imports no framework); they are ContentType values
    t: Any = _MEAI_TO_MAF_TYPE.get(meai_type) if isinstance(meai_type, str) else None
    ap = item.get("additionalProperties")
    fields: dict[str, Any] = {"additional_properties": dict(ap) if isinstance(ap, Mapping) else {}}
    if t is None:
        return Content("text", text="", **fields)
    for attribute, key in _FIELDS[t]:
        fields[attribute] = _from_meai(attribute, item.get(key))
    if t == "data":  # the media type a data URI names
        named = re.match(r"data:([^,;]*)", fields["uri"] or "")
        fields["media_type"] = (named[1] if named else "") or None
    elif t == "function_call":
        fields["hosted"] = False
    elif t == "function_result":
        # the items MAF derives from a result, as Content.from_function_result does
        fields["items"] = list(Content.from_function_result("_", result=fields["result"]).items or [])
    return Content(t, **fields)


def _to_meai(attribute: str, value: Any) -> Any:
    if attribute == "arguments":  # MEAI wants an object; MAF may hold the model's JSON text (kept verbatim by the diff)
        with contextlib.suppress(ValueError):
            value = json.loads(value) if isinstance(value, str) else value
        return dict(value) if isinstance(value, Mapping) else None
    if attribute == "informational_only":
        return True if value else None
    if attribute == "usage_details" and value is not None:
        usage = {_USAGE_KEYS_BACK[k]: v for k, v in value.items() if k in _USAGE_KEYS_BACK and v is not None}
        additional = {k: v for k, v in value.items() if k not in _USAGE_KEYS_BACK and v is not None}
        return {**usage, "additionalCounts": additional} if additional else usage
    return value


def _from_meai(attribute: str, value: Any) -> Any:
    if attribute == "arguments":
        return dict(value) if isinstance(value, Mapping) else None
    if attribute == "informational_only":
        return value is True
    if attribute == "usage_details":
        if not isinstance(value, Mapping):
            return None
        counts = value.get("additionalCounts")
        usage = {k: v for k, v in counts.items() if k not in _USAGE_KEYS_BACK} if isinstance(counts, Mapping) else {}
        usage.update({maf: value[meai] for meai, maf in _USAGE_KEYS.items() if value.get(meai) is not None})
        return usage
    return value if attribute == "result" else _str(value)


def _decode_full(item: Mapping[str, Any]) -> Content:
    """``_decode_raw`` plus, under ``chatlab.meai``, whatever of ``item`` it could not express."""
    content = _decode_raw(item)
    if extra := _meai_diff(item, _encode_raw(content)):
        content.additional_properties[MEAI_EXTRA_KEY] = extra
    return content


def _encode_message_raw(message: Message, contents: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(authorName=message.author_name, role=message.role, contents=contents, messageId=message.message_id)
    return _with_properties({k: v for k, v in out.items() if v is not None}, message.additional_properties)


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
    if extra := _meai_diff(item, back, skip=("contents",)):
        message.additional_properties[MEAI_EXTRA_KEY] = extra
    return message


def _carry_maf(
    raw: dict[str, Any], target: dict[str, Any], back: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """``raw``, plus under ``chatlab.maf`` the MAF fields of ``target`` that ``back`` (decoding ``raw``) loses."""
    if not _maf_diff(target, back(raw)):
        return raw
    if raw.get("additionalProperties") == {}:
        raw = {k: v for k, v in raw.items() if k != "additionalProperties"}
    extra = _maf_diff(target, back(raw))
    return {**raw, "additionalProperties": {**(raw.get("additionalProperties") or {}), MAF_EXTRA_KEY: extra}}


def _maf_diff(target: Mapping[str, Any], back: Mapping[str, Any]) -> dict[str, Any]:
    """MAF fields (``to_dict`` form) of ``target`` that ``back`` does not reproduce."""
    extra = {k: v for k, v in target.items() if k not in back or back[k] != v}
    for k in back:
        if k not in target:  # absent from a to_dict means None (False for informational_only)
            extra[k] = False if k == "informational_only" else None
    return extra


def _meai_diff(original: Mapping[str, Any], back: Mapping[str, Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """JSON keys of ``original`` that ``back`` does not reproduce, and keys ``back`` adds."""
    extra: dict[str, Any] = {k: v for k, v in original.items() if k not in skip and (k not in back or back[k] != v)}
    absent = [k for k in back if k not in original and k not in skip]
    if absent:
        extra[_ABSENT] = absent
    return extra


def _with_properties(out: dict[str, Any], properties: Mapping[str, Any]) -> dict[str, Any]:
    """``out`` with MAF's additional properties, then the MEAI-only fields recorded under ``chatlab.meai``."""
    if ap := {k: v for k, v in properties.items() if k != MEAI_EXTRA_KEY}:
        out["additionalProperties"] = ap
    extra = properties.get(MEAI_EXTRA_KEY)
    if isinstance(extra, Mapping):
        out.update((k, v) for k, v in extra.items() if k != _ABSENT)
        for k in extra.get(_ABSENT) or ():
            out.pop(k, None)
    return out


def _split_extra(item: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``item`` without ``chatlab.maf`` (and without the ``additionalProperties`` it alone needed)."""
    j0 = dict(item)
    ap = j0.get("additionalProperties")
    if not isinstance(ap, Mapping) or MAF_EXTRA_KEY not in ap:
        return j0, None
    if rest := {k: v for k, v in ap.items() if k != MAF_EXTRA_KEY}:
        j0["additionalProperties"] = rest
    else:
        del j0["additionalProperties"]
    extra = ap[MAF_EXTRA_KEY]
    if not isinstance(extra, Mapping):
        raise ChatHistoryCodecError(f"additionalProperties[{MAF_EXTRA_KEY!r}] must be a JSON object")
    return j0, dict(extra)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
