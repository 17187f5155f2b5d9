"""What the client side and the service side both speak; both import this module and it imports neither.

:data:`CONTENT_KINDS` is the one table of message content kinds that the codec, the service's schema, the display
and the history window read (a new ``$type`` is one new entry)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

SERVICE_URL_VARIABLE = "CHAT_HISTORY_SERVICE_URL"  # where the service runs (the article's variable)
API_KEY_VARIABLE = "CHAT_HISTORY_SERVICE_API_KEY"  # the key a client sends (docs/protections.md)
LLM_VARIABLE = "CHATLAB_LLM"  # which LLM the tutorial uses: offline, endpoint or auto (docs/llm.md)
DEFAULT_SERVICE_URL = "http://localhost:5000"  # the article's service address


def conversation_path(key: str) -> str:
    """The path of a conversation on the service: the key percent-encoded into one segment (RFC 3986), as requests,
    ``Location`` and ``Link`` carry it."""
    return "/chat-history/" + quote(key, safe="")


#: Between a namespace and the client's key in a stored key (``alice/286d...``): what API keys scope. A keyless
#: service sees only the keys without it, which every store lists from an index of their own (``plain=True``).
NAMESPACE_SEPARATOR = "/"


def is_plain(stored_key: str) -> bool:
    """Whether a stored key lies outside every namespace: one a service without API keys owns."""
    return NAMESPACE_SEPARATOR not in stored_key


ABSENT = "0"  # the version of a conversation that does not exist (never written, or deleted)

# In a message's additionalProperties: it is a summary checkpoint of messages 1..N (docs/conversations.md).
SUMMARY_THROUGH = "chatlab.summaryThrough"
# The tags a fork carries: the key of its origin, and how many of its messages it was forked with, as text.
FORK_OF = "chatlab.forkOf"
FORK_THROUGH = "chatlab.forkThrough"


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """The article's ``ChatHistorySummary``: a conversation key and how many messages it holds. What the stores add
    (times in seconds since the epoch; ``participants``: how many messages each author signed, counted at write time)
    takes no part in comparisons: it still equals ``ConversationSummary(key, n)``."""

    conversation_key: str
    message_count: int
    version: str | None = field(default=None, compare=False)
    created_at: float | None = field(default=None, compare=False)
    updated_at: float | None = field(default=None, compare=False)
    title: str | None = field(default=None, compare=False)
    tags: Mapping[str, str] = field(default_factory=dict, compare=False)
    participants: Mapping[str, int] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Version:
    """A conversation's version, ``"<generation>.<count>"`` or ``"0"`` if absent (:mod:`chatlab.stores.base`)."""

    generation: str | None
    count: int

    def __str__(self) -> str:
        return ABSENT if self.generation is None else f"{self.generation}.{self.count}"

    @property
    def etag(self) -> str:
        """The version as an HTTP ``ETag`` (a strong entity tag: quoted)."""
        return f'"{self}"'

    @classmethod
    def parse(cls, text: str) -> Version | None:
        """The version that ``text`` (``"g.N"`` or ``"0"``, unquoted) spells, or ``None`` if it is not one."""
        if text == ABSENT:
            return cls(None, 0)
        generation, dot, count = text.rpartition(".")
        if not dot or not generation or not count.isdigit() or not count.isascii():
            return None
        return cls(generation, int(count))

    @classmethod
    def from_etag(cls, etag: str | None) -> Version | None:
        """The version in an ``ETag`` header, or ``None`` if there is none or it is not one of ours."""
        tag = (etag or "").strip()
        if tag.startswith("W/") or len(tag) < 3 or tag[0] != '"' or tag[-1] != '"':
            return None
        return cls.parse(tag[1:-1])

    def continues(self, generation: str | None, count: int, added: int) -> bool:
        """Whether this version is what holding ``count`` messages of ``generation`` plus ``added`` more gives."""
        return self.count == count + added and (
            count == 0 or (generation is not None and self.generation == generation)
        )


@dataclass(eq=False)
class Refused(Exception):
    """A request the service refuses, answered as RFC 9457 problem JSON (``errors``: each invalid field of a body)."""

    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.detail)


Role = Literal["call", "result"]
_ROLES: tuple[Role, ...] = ("call", "result")


@dataclass(frozen=True, slots=True)
class ContentKind:
    """One kind of message content: ``maf``, the Agent Framework ``Content.type``; ``meai``, the ``$type`` .NET writes.

    A row names both only where the codec converts one into the other field by field; any other kind crosses whole
    inside an empty text content (``chatlab.client.codec``). The service accepts every ``meai`` kind."""

    maf: str | None
    meai: str | None
    csharp: str | None = None  # the C# class name the article's PrintMessages prints (None: the MAF type)
    role: Role | None = None  # "call": answered later; "result": answers an earlier call
    link: str = "call_id"  # the MAF attribute that links a call to its results (approvals use their id)
    description: str | None = None  # one line for the service's OpenAPI description


_STORED_AS_THEY_COME = (
    "toolApprovalRequest",
    "toolApprovalResponse",
    "functionApprovalRequest",
    "functionApprovalResponse",
    "mcpServerToolCall",
    "mcpServerToolResult",
    "mcpServerToolApprovalRequest",
    "mcpServerToolApprovalResponse",
    "codeInterpreterToolCall",
    "codeInterpreterToolResult",
    "imageGenerationToolCall",
    "imageGenerationToolResult",
    "userInputRequest",
    "userInputResponse",
)

CONTENT_KINDS: tuple[ContentKind, ...] = (
    # converted field by field (the article's kinds first, in the order the service lists them)
    ContentKind("text", "text", "TextContent", description="Text."),
    ContentKind("text_reasoning", "reasoning", "TextReasoningContent", description="The model's reasoning."),
    ContentKind("data", "data", "DataContent", description="Binary data as a data: URI with base64."),
    ContentKind("uri", "uri", "UriContent", description="A reference by URI."),
    ContentKind("error", "error", "ErrorContent", description="An error reported in the conversation."),
    ContentKind("usage", "usage", "UsageContent", description="Token usage."),
    ContentKind(
        "function_call",
        "functionCall",
        "FunctionCallContent",
        "call",
        description="A tool call requested by the model.",
    ),
    ContentKind(
        "function_result", "functionResult", "FunctionResultContent", "result", description="The result of a tool call."
    ),
    ContentKind("hosted_file", "hostedFile"),
    ContentKind("hosted_vector_store", "hostedVectorStore"),
    # MEAI kinds the service stores as they come (in this order in its schema)
    *(ContentKind(None, meai) for meai in _STORED_AS_THEY_COME),
    # MAF kinds the codec carries whole; the calls and results among them bind the history window
    *(
        ContentKind(f"{tool}_tool_{role}", None, role=role)
        for tool in ("code_interpreter", "image_generation", "mcp_server", "search", "shell", "computer")
        for role in _ROLES
    ),
    ContentKind("shell_command_output", None, role="result"),
    ContentKind("function_approval_request", None, role="call", link="id"),
    ContentKind("function_approval_response", None, role="result", link="id"),
    ContentKind("oauth_consent_request", None),
)

_BY_MAF = {kind.maf: kind for kind in CONTENT_KINDS if kind.maf is not None}


def kind_of_maf(maf_type: str) -> ContentKind | None:
    """The row of a MAF ``Content.type`` (``None`` for a type this table does not know)."""
    return _BY_MAF.get(maf_type)


def link_of(maf_type: str) -> tuple[Role, str] | None:
    """Whether a MAF content type is a call or a result, and the attribute linking the two (a type newer than the
    table is judged by its name)."""
    kind = _BY_MAF.get(maf_type)
    if kind is not None:
        return None if kind.role is None else (kind.role, kind.link)
    for role in _ROLES:
        if maf_type.endswith(f"_{role}"):
            return role, "call_id"
    return None
