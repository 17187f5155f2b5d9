"""Summary checkpoints: the service's summary view, and the offline model's summaries that keep tool results."""

from __future__ import annotations

import json

import pytest

from chatlab.client.compaction import Compaction
from chatlab.service.checkpoints import summarized_through, summary_view
from chatlab.tutorial.offline_model import SUMMARY_LABEL_JA, decide


def message(text: str, through: int | None = None) -> bytes:
    item: dict[str, object] = {"role": "assistant", "contents": [{"$type": "text", "text": text}]}
    if through is not None:
        item["additionalProperties"] = {"chatlab.summaryThrough": through}
    return json.dumps(item, separators=(",", ":")).encode()


def test_a_checkpoint_is_known_by_its_property_only() -> None:
    assert summarized_through(message("s", 3)) == 3
    assert summarized_through(message("chatlab.summaryThrough")) is None  # the words in a text are not it
    assert summarized_through(message("s", -1)) is None
    bad = b'{"role":"assistant","additionalProperties":{"chatlab.summaryThrough":true}}'
    assert summarized_through(bad) is None


def test_the_view_is_the_latest_checkpoint_then_what_follows_its_n() -> None:
    m = [message(f"m{i}") for i in range(1, 6)]
    assert summary_view(m) == m  # no checkpoint: the whole conversation
    first = message("summary of 1..3", 3)
    # 1 2 3 S(3) 4 5: the checkpoint, then the messages after 3 (the checkpoint not twice)
    assert summary_view([*m[:3], first, *m[3:]]) == [first, *m[3:]]
    # written while 4 was being appended: 1 2 3 4 S(3) 5 -> S, 4, 5
    assert summary_view([*m[:4], first, m[4]]) == [first, m[3], m[4]]
    later = message("summary of 1..6", 6)
    history = [*m[:3], first, *m[3:5], later, message("m7")]
    assert summary_view(history) == [later, history[-1]]  # the latest one wins


def test_a_checkpoint_that_claims_messages_after_it_is_an_ordinary_message() -> None:
    m = [message("a"), message("b", 5), message("c")]
    assert summary_view(m) == m


def test_the_offline_model_summarizes_keeping_every_tool_result() -> None:
    history = [
        {"role": "user", "content": "現在時刻を教えてください"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "2026-04-16 01:30:52"},
        {"role": "assistant", "content": "現在の日時は **2026-04-16 01:30:52** です。"},
    ]
    reply = decide([*history, {"role": "user", "content": Compaction().prompt}])
    assert reply.text is not None and reply.text.startswith(SUMMARY_LABEL_JA)
    assert "2026-04-16 01:30:52" in reply.text and "現在時刻を教えてください" in reply.text
    # a later elapsed-time question finds the first time in the summary
    after = [
        {"role": "assistant", "content": reply.text},
        {"role": "user", "content": "もう一度現在時刻を取得してください"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "2026-04-16 01:31:05"},
        {"role": "assistant", "content": "現在の日時は **2026-04-16 01:31:05** です。"},
        {"role": "user", "content": "最初の時刻からどれくらい経過していますか?"},
    ]
    assert "**13 秒**" in (decide(after).text or "")


def test_a_compaction_needs_a_threshold() -> None:
    with pytest.raises(ValueError, match="max_messages or max_tokens"):
        Compaction(max_messages=None)
    with pytest.raises(ValueError, match="2 or more"):
        Compaction(max_messages=1)
