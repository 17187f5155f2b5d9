"""A conversation's metadata: a title and string tags, set with ``PATCH /chat-history/{key}``.

Metadata sits beside the messages and has no part in the version, so setting a title never invalidates a client's
cached history. A ``PATCH`` body is a JSON merge patch (RFC 7396): a string sets, ``null`` removes, what is not named
stays. ``replace`` keeps the metadata; ``delete`` and retention drop it. Every store applies a change with
:meth:`MetadataChange.applied` (the Redis store's script follows the same rule and limits)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

MAX_TITLE = 200  # characters
MAX_TAGS = 32  # tags a conversation may carry
MAX_TAG_NAME = 64  # characters
MAX_TAG_VALUE = 200  # characters

TAG_NAME_PATTERN = r"[A-Za-z0-9_.-]+"
"""What a tag name may hold: letters, digits, ``_``, ``.`` and ``-`` (so ``?tag=name:value`` splits at the
first ``:``, and the service's own tags, ``chatlab.forkOf``, read as namespaced). Matched whole (``fullmatch``): a
final newline is not let through as ``$`` would."""

TEXT_PATTERN = r"[^\x00-\x1f\x7f-\x9f]*"
"""What a title or a tag value may hold: any text but control characters (C0, DEL and C1, such as NUL, a newline or
U+0085), which a conversation key refuses too; nor a lone surrogate (:func:`unstorable`)."""

#: Control characters (C0, DEL, C1) and lone surrogates: no store keeps them all (PostgreSQL refuses NUL, UTF-8 a
#: lone surrogate), so neither a key nor a title or tag may hold one.
_UNSTORABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def unstorable(text: str) -> bool:
    """Whether ``text`` holds a character no store keeps: a control character or a lone surrogate."""
    return _UNSTORABLE.search(text) is not None


_TAG_NAME = re.compile(TAG_NAME_PATTERN)


class MetadataError(ValueError):
    """A title or tag the service refuses (the message says which and why); nothing was written."""


class TooManyTags(MetadataError):
    """The change would leave the conversation with more than :data:`MAX_TAGS` tags; nothing was written."""


def _check_text(what: str, text: str, limit: int) -> None:
    if len(text) > limit:
        raise MetadataError(f"{what} is {len(text)} characters long; keep it to {limit}")
    if unstorable(text):
        raise MetadataError(
            f"{what} holds a control character (such as a newline, NUL or U+0085) or a lone surrogate; remove it"
        )


@dataclass(frozen=True, slots=True)
class MetadataChange:
    """What one ``PATCH`` changes: the title when ``sets_title`` (``title=None`` removes it), and each tag in
    ``tags`` (a value of ``None`` removes that tag). Checked when made: a bad one never reaches a store."""

    title: str | None = None
    sets_title: bool = False
    tags: Mapping[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.title is not None:
            _check_text("the title", self.title, MAX_TITLE)
        for name, value in self.tags.items():
            if not 0 < len(name) <= MAX_TAG_NAME or not _TAG_NAME.fullmatch(name):
                raise MetadataError(f"tag name {name[:80]!r}: use 1 to {MAX_TAG_NAME} letters, digits, '_', '.' or '-'")
            if value is not None:
                _check_text(f"the value of tag {name!r}", value, MAX_TAG_VALUE)

    @classmethod
    def setting(cls, title: str | None = None, tags: Mapping[str, str] | None = None) -> MetadataChange:
        """A change that sets this title (if given) and these tags: what ``restore`` and a fork write."""
        return cls(title, title is not None, dict(tags or {}))

    def applied(self, title: str | None, tags: Mapping[str, str]) -> tuple[str | None, dict[str, str]]:
        """The title and tags after this change; :class:`TooManyTags` if that is more than :data:`MAX_TAGS` tags."""
        merged = {name: value for name, value in {**tags, **self.tags}.items() if value is not None}
        if len(merged) > MAX_TAGS:
            raise TooManyTags(f"a conversation carries at most {MAX_TAGS} tags; this change would leave {len(merged)}")
        return (self.title if self.sets_title else title), merged
