"""Rich views for notebooks: a conversation as a chat (:func:`show_conversation`), summaries as a table.

Each has ``_repr_html_`` (every value escaped) and a plain ``repr``; messages are shown as their stored MEAI JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from html import escape
from typing import Any

from agent_framework import Message

from ..client.codec import message_to_meai

_BUBBLE = "margin:4px 0;padding:6px 10px;border-radius:10px;border:1px solid #d9dde5;max-width:85%;"
_BACKGROUND = {"user": "#dcecff", "tool": "#f1f5ee", "system": "#fff8e6"}
_META = "font-size:11px;color:#667085;"
_LABEL = "font-size:11px;font-weight:600;color:#667085;margin-right:6px;"
_PRE = "margin:2px 0;padding:4px 6px;background:#f6f7f9;white-space:pre-wrap;font-size:12px;"


def _e(value: Any) -> str:
    return escape(value if isinstance(value, str) else str(value))


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)


class ConversationView:
    """A conversation as a chat: user and assistant turns, each tool call with its arguments and its result."""

    def __init__(self, messages: Iterable[Message | Mapping[str, Any]], title: str | None = None) -> None:
        self.messages = [message_to_meai(m) if isinstance(m, Message) else dict(m) for m in messages]
        self.title = title
        contents = [c for m in self.messages for c in _contents(m)]
        self._results = {str(c.get("callId")): c.get("result") for c in contents if c.get("$type") == "functionResult"}

    def _repr_html_(self) -> str:
        title = f"<div style='font-weight:600;margin-bottom:4px'>{_e(self.title)}</div>" if self.title else ""
        items = "".join(self._message_html(i, m) for i, m in enumerate(self.messages, 1))
        count = f"<div style='{_META}'>{len(self.messages)} messages</div>"
        style = "font-family:sans-serif;max-width:760px"
        return f"<div class='chatlab-conversation' style='{style}'>{title}{count}{items}</div>"

    def __repr__(self) -> str:
        lines = [f"{self.title}:"] if self.title else []
        for message in self.messages:
            parts = [_text_of(c, self._results) for c in _contents(message)]
            lines.append(f"{message.get('role', '?')}: {' | '.join(parts)}")
        return "\n".join(lines) if lines else "(no messages)"

    def _message_html(self, number: int, message: Mapping[str, Any]) -> str:
        role = str(message.get("role", "unknown"))
        align = "margin-left:auto;" if role == "user" else ""
        style = f"{_BUBBLE}{align}background:{_BACKGROUND.get(role, '#ffffff')};"
        meta = [f"<b style='color:#1d2330'>{_e(role)}</b>", f"#{number}"]
        meta += [_e(message[k]) for k in ("authorName", "createdAt") if message.get(k)]
        body = "".join(self._content_html(c) for c in _contents(message))
        return (
            f"<div class='chatlab-message' data-role='{_e(role)}' style='{style}'>"
            f"<div style='{_META}'>{' · '.join(meta)}</div>{body}</div>"
        )

    def _content_html(self, content: Mapping[str, Any]) -> str:
        kind = content.get("$type")
        if kind == "text":
            return f"<div style='white-space:pre-wrap'>{_e(content.get('text', ''))}</div>"
        if kind == "functionCall":
            return self._call_html(content)
        if kind == "functionResult":
            return f"<div style='{_META}'>↳ result of call {_e(content.get('callId', ''))} (shown with its call)</div>"
        label = f"<span style='{_LABEL}'>{_e(kind or 'content')}</span>{_e(_text_of(content, self._results))}"
        raw = f"<pre style='{_PRE}'>{_e(_json(dict(content)))}</pre>"
        return f"<details class='chatlab-content'><summary>{label}</summary>{raw}</details>"

    def _call_html(self, content: Mapping[str, Any]) -> str:
        call_id, result = str(content.get("callId")), "<i>no result stored</i>"
        if call_id in self._results:
            result = f"<pre class='chatlab-result' style='{_PRE}'>{_e(_json(self._results[call_id]))}</pre>"
        arguments = _e(_json(content.get("arguments") or {}))
        return (
            f"<details open class='chatlab-tool-call' style='margin:2px 0'><summary><span style='{_LABEL}'>tool call"
            f"</span><b>{_e(content.get('name', ''))}</b> <span style='{_META}'>{_e(call_id)}</span></summary>"
            f"<div style='{_LABEL}'>arguments</div><pre class='chatlab-arguments' style='{_PRE}'>{arguments}</pre>"
            f"<div style='{_LABEL}'>result</div>{result}</details>"
        )


class SummariesView:
    """Summaries (the provider's or the service's JSON) as a table: key, message count, when last written."""

    def __init__(self, summaries: Iterable[Any]) -> None:
        self.rows = [_summary_row(s) for s in summaries]

    def _repr_html_(self) -> str:
        head = "".join(
            f"<th style='text-align:{a}'>{h}</th>"
            for h, a in (("conversation key", "left"), ("messages", "right"), ("last written", "left"))
        )
        body = "".join(
            f"<tr><td style='text-align:left;font-family:monospace'>{_e(key)}</td>"
            f"<td style='text-align:right'>{count:,}</td><td style='text-align:left'>{_e(written or '—')}</td></tr>"
            for key, count, written in self.rows
        )
        return f"<table class='chatlab-summaries'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def __repr__(self) -> str:
        lines = [f"{key}  {count:>6,}  {written or '—'}" for key, count, written in self.rows]
        return "\n".join(lines) if lines else "(no conversations)"


show_conversation = ConversationView
show_summaries = SummariesView


def _contents(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    contents = message.get("contents")
    return [c for c in contents if isinstance(c, Mapping)] if isinstance(contents, list) else []


def _text_of(content: Mapping[str, Any], results: Mapping[str, Any]) -> str:
    kind = content.get("$type")
    if kind == "text":
        return str(content.get("text", ""))
    if kind == "functionCall":
        call_id = str(content.get("callId"))
        arguments = json.dumps(content.get("arguments") or {}, ensure_ascii=False)
        outcome = f" -> {_json(results[call_id])}" if call_id in results else ""
        return f"[tool call {content.get('name')} {arguments}{outcome}]"
    if kind == "functionResult":
        return f"[result of {content.get('callId')}]"
    if kind in ("reasoning", "error"):
        return f"[{kind}: {content.get('text') or content.get('message') or ''}]"
    return f"[{kind}]"


def _summary_row(summary: Any) -> tuple[str, int, str | None]:
    """(key, count, last written) of a summary object or of the service's JSON."""
    if isinstance(summary, Mapping):
        written = summary.get("updatedAt") or summary.get("createdAt")
        return str(summary["conversationKey"]), int(summary["messageCount"]), _when(written)
    written = getattr(summary, "updated_at", None) or getattr(summary, "created_at", None)
    return str(summary.conversation_key), int(summary.message_count), _when(written)


def _when(value: Any) -> str | None:
    """A time as the table shows it: a ``datetime``, seconds since the epoch (a summary's), or text as it is."""
    if value is None:
        return None
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    return value.isoformat(sep=" ", timespec="seconds") if isinstance(value, datetime) else str(value)
