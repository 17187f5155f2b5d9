"""A quick check that a body's messages are certainly valid, so the common body skips pydantic's slower models: msgspec
structs built from the schema's table of checked fields (:mod:`.schema`), so what they accept the models accept;
anything else goes to pydantic, which decides and words the refusal. It checks either kind of piece of a large body
(:mod:`.pieces`): pydantic's models of 500,000 content items, made and dropped a piece at a time, still had the
garbage collector run several full collections, each holding every thread for tens of milliseconds; these structs
are not tracked by it (msgspec tracks a struct only when it holds a container), so checking the pieces runs none."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Union

import msgspec

from .pieces import Kind

Json = Any
#: The struct that checks each kind of piece: a struct whose one field, named after the kind, is its list.
Checked = dict[Kind, Any]


def structs(checked: dict[str, dict[str, tuple[Any, Any]]], tag_name: str) -> Checked:
    """For each kind of piece, a struct whose one field is the list: ``messages`` a list of messages, their contents
    tagged by ``$type`` (one struct per type of ``checked``, other keys allowed; ``tag_name``: the models' tag field),
    ``contents`` a list of such contents. A struct, not ``list[...]``: msgspec keeps a struct's type information, but
    collects a generic alias's anew on every ``convert``."""

    class Content(msgspec.Struct, tag_field="$type", kw_only=True):
        annotations: list[dict[str, Json]] | None = None
        additionalProperties: dict[str, Json] | None = None

    # pydantic reads a content's tag from this key too (the tag field's own name): one that holds it, whatever
    # the value, is left to pydantic (UNSET is the only value this type takes, and no JSON value is it)
    tag_field = (tag_name, msgspec.UnsetType, msgspec.UNSET)

    def kind(name: str, fields: dict[str, tuple[Any, Any]]) -> Any:
        own = [
            (field, annotation, msgspec.NODEFAULT if default is ... else default)
            for field, (annotation, default) in fields.items()
        ]
        return msgspec.defstruct(f"{name}Content", [tag_field, *own], bases=(Content,), tag=name, kw_only=True)

    kinds = [kind(name, fields) for name, fields in checked.items()]
    contents: Any = list[Union[tuple(kinds)]]  # type: ignore[misc]  # noqa: UP007 - built at run time
    message = msgspec.defstruct(
        "ChatMessage",
        [
            ("role", Annotated[str, msgspec.Meta(min_length=1)]),
            ("contents", contents),
            ("authorName", str | None, None),
            ("createdAt", str | None, None),  # ISO 8601: see valid()
            ("messageId", str | None, None),
            ("additionalProperties", dict[str, Json] | None, None),
        ],
        kw_only=True,
    )
    return {
        "messages": msgspec.defstruct("Messages", [("messages", list[message])]),  # type: ignore[valid-type]
        "contents": msgspec.defstruct("Contents", [("contents", contents)]),
    }


def valid(kind: Kind, items: list[Json], checked: Checked) -> bool:
    """Whether ``items``, a list of ``kind``, are certainly valid as ``checked`` (of :func:`structs`) says; else
    pydantic decides."""
    try:
        converted = getattr(msgspec.convert({kind: items}, checked[kind]), kind)
        if kind == "messages":
            for message in converted:
                if message.createdAt is not None:
                    datetime.fromisoformat(message.createdAt)
    except ValueError:  # msgspec.ValidationError is one
        return False
    return True
