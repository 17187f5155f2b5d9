"""The notebook views' HTML: a conversation as a chat, summaries as a table, everything escaped."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

from chatlab.client.codec import messages_from_meai
from chatlab.client.provider import ChatHistorySummary
from chatlab.tutorial.samples import sample_turn
from chatlab.tutorial.views import ConversationView, SummariesView, show_conversation, show_summaries

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>&amp;'


class Tags(HTMLParser):
    """The tags and text of an HTML fragment, as a browser's parser sees them."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_a_conversation_shows_each_tool_call_with_its_arguments_and_result() -> None:
    turn = sample_turn(3)
    turn[1]["contents"][0]["arguments"] = {"zone": "Asia/Tokyo"}
    view = show_conversation(turn, title="the article's turn")
    html = view._repr_html_()
    parsed = Tags(html)
    roles = [attrs["data-role"] for tag, attrs in parsed.tags if attrs.get("class") == "chatlab-message"]
    assert roles == ["user", "assistant", "tool", "assistant"]
    call = re.search(r"<details open class='chatlab-tool-call'.*?</details>", html, re.S)
    assert call is not None
    assert "GetDateTime" in call[0] and "call_3" in call[0]
    assert "&quot;zone&quot;: &quot;Asia/Tokyo&quot;" in call[0]  # the arguments, inside the call
    assert "<pre class='chatlab-result'" in call[0] and "2026-04-16 01:30:52" in call[0]  # and its result
    assert "result of call call_3 (shown with its call)" in html
    assert "現在の日時は **2026-04-16 01:30:52** です。" in "".join(parsed.text)
    assert repr(view).splitlines() == [
        "the article's turn:",
        "user: 現在時刻を教えてください (turn 3)",
        'assistant: [tool call GetDateTime {"zone": "Asia/Tokyo"} -> 2026-04-16 01:30:52]',
        "tool: [result of call_3]",
        "assistant: 現在の日時は **2026-04-16 01:30:52** です。",
    ]


def test_maf_messages_and_meai_json_give_the_same_view() -> None:
    turn = sample_turn(1)
    assert ConversationView(messages_from_meai(turn))._repr_html_() == ConversationView(turn)._repr_html_()


def test_other_content_kinds_are_labelled_and_a_call_without_result_says_so() -> None:
    messages: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "contents": [
                {"$type": "reasoning", "text": "thinking"},
                {"$type": "usage", "details": {"inputTokenCount": 10}},
                {"$type": "functionCall", "callId": "c9", "name": "Lookup", "arguments": None},
            ],
        }
    ]
    html = ConversationView(messages)._repr_html_()
    assert ">reasoning</span>" in html and ">usage</span>" in html and "thinking" in html
    assert "<i>no result stored</i>" in html


def test_every_value_of_a_conversation_is_escaped() -> None:
    messages: list[dict[str, Any]] = [
        {"role": HOSTILE, "authorName": HOSTILE, "contents": [{"$type": "text", "text": HOSTILE}]},
        {
            "role": "assistant",
            "contents": [{"$type": "functionCall", "callId": HOSTILE, "name": HOSTILE, "arguments": {HOSTILE: 1}}],
        },
        {"role": "tool", "contents": [{"$type": "functionResult", "callId": HOSTILE, "result": HOSTILE}]},
        {"role": "assistant", "contents": [{"$type": "error", "message": HOSTILE}]},
    ]
    html = ConversationView(messages, title=HOSTILE)._repr_html_()
    parsed = Tags(html)
    assert {tag for tag, _ in parsed.tags} <= {"div", "b", "details", "summary", "span", "pre", "i"}
    assert not any(name.startswith("on") or name == "src" for _, attrs in parsed.tags for name in attrs)
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "&amp;amp;" in html
    assert HOSTILE in "".join(parsed.text)  # shown as the text it is


def test_summaries_are_a_table_with_the_last_write_when_known() -> None:
    view = show_summaries(
        [
            ChatHistorySummary("a" * 32, 10),
            {"conversationKey": "b", "messageCount": 1234, "updatedAt": "2026-04-16T01:30:52+00:00"},
        ]
    )
    html = view._repr_html_()
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
    assert cells == ["a" * 32, "10", "—", "b", "1,234", "2026-04-16T01:30:52+00:00"]
    assert repr(view).splitlines()[1] == "b   1,234  2026-04-16T01:30:52+00:00"


def test_summary_objects_with_times_show_them() -> None:
    class Summary:
        conversation_key = "k"
        message_count = 4
        created_at = datetime(2026, 4, 16, 1, 0, tzinfo=UTC)
        updated_at = datetime(2026, 4, 16, 1, 30, 52, tzinfo=UTC)

    assert (
        re.findall(r"<td[^>]*>(.*?)</td>", SummariesView([Summary()])._repr_html_())[2] == "2026-04-16 01:30:52+00:00"
    )


def test_every_value_of_a_summary_is_escaped() -> None:
    html = SummariesView([{"conversationKey": HOSTILE, "messageCount": 1, "createdAt": HOSTILE}])._repr_html_()
    assert "<script" not in html and "<img" not in html
    assert "".join(Tags(html).text).count(HOSTILE) == 2
    assert repr(SummariesView([])) == "(no conversations)"


def test_summary_times_in_seconds_show_as_dates() -> None:
    from chatlab.vocabulary import ConversationSummary

    summary = ConversationSummary("k", 4, created_at=1776301200.0, updated_at=1776303052.5)  # what the client gives
    assert re.findall(r"<td[^>]*>(.*?)</td>", SummariesView([summary])._repr_html_())[2] == "2026-04-16 01:30:52+00:00"
