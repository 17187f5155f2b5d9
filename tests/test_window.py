"""History windowing: the newest messages within a budget, never a tool call cut from its result."""

from __future__ import annotations

import pytest
from agent_framework import Content, Message
from hypothesis import given, settings
from hypothesis import strategies as st

from chatlab.client.window import estimate_tokens, window_messages


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Random agent conversations: questions, rounds of parallel tool calls answered in any grouping, answers."""
    messages: list[Message] = []
    next_id = 0
    for _ in range(draw(st.integers(0, 6))):
        messages.append(Message("user", [Content.from_text(draw(st.text(max_size=30)))]))
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                kind = draw(st.sampled_from(["function", "mcp"]))
                call_id = f"c{next_id}"
                next_id += 1
                if kind == "function":
                    calls.append(
                        (call_id, Content.from_function_call(call_id, "GetDateTime", arguments={"n": next_id}))
                    )
                else:
                    calls.append((call_id, Content.from_mcp_server_tool_call(call_id, "search", server_name="s")))
            contents = [c for _, c in calls]
            if draw(st.booleans()):
                contents.insert(0, Content.from_text("let me look"))
            messages.append(Message("assistant", contents))
            answered = [cid for cid, _ in calls if draw(st.integers(0, 9)) > 0]  # now and then a call left unanswered
            order = draw(st.permutations(answered))
            i = 0
            while i < len(order):
                size = draw(st.integers(1, len(order) - i))
                messages.append(
                    Message(
                        "tool",
                        [
                            Content.from_function_result(cid, result="x" * draw(st.integers(0, 40)))
                            for cid in order[i : i + size]
                        ],
                    )
                )
                i += size
        if draw(st.booleans()):
            messages.append(Message("assistant", [Content.from_text(draw(st.text(max_size=60)))]))
        if draw(st.integers(0, 5)) == 0:  # a tool approval round trip
            request_id = f"a{next_id}"
            next_id += 1
            call = Content.from_function_call(f"c{next_id}", "Delete")
            next_id += 1
            messages.append(Message("assistant", [Content.from_function_approval_request(request_id, call)]))
            messages.append(Message("user", [Content.from_function_approval_response(True, request_id, call)]))
    return messages


def _links(message: Message) -> set[str]:
    out = set()
    for content in message.contents:
        if content.type.startswith("function_approval_"):
            out.add(f"a:{content.id}")
        elif getattr(content, "call_id", None):
            out.add(f"c:{content.call_id}")
    return out


def _split_links(messages: list[Message], start: int) -> set[str]:
    """Links with a message on each side of position ``start``: a window starting there would cut them."""
    before = set().union(*(_links(m) for m in messages[:start])) if start else set()
    after = set().union(*(_links(m) for m in messages[start:])) if start < len(messages) else set()
    return before & after


@settings(max_examples=300, deadline=None)
@given(conversations(), st.one_of(st.none(), st.integers(0, 40)), st.one_of(st.none(), st.integers(0, 400)))
def test_a_window_is_the_longest_safe_suffix_within_the_budget(
    messages: list[Message], max_messages: int | None, max_tokens: int | None
) -> None:
    window = window_messages(messages, max_messages=max_messages, max_tokens=max_tokens)
    start = len(messages) - len(window)
    assert all(a is b for a, b in zip(window, messages[start:], strict=True)), "a window is a suffix"
    assert not _split_links(messages, start), "no call is separated from its result"
    if max_messages is not None:
        assert len(window) <= max_messages
    if max_tokens is not None:
        assert sum(estimate_tokens(m) for m in window) <= max_tokens
    # maximal: every longer suffix breaks the budget or cuts a call from its result
    for longer in range(start - 1, -1, -1):
        fits = (max_messages is None or len(messages) - longer <= max_messages) and (
            max_tokens is None or sum(estimate_tokens(m) for m in messages[longer:]) <= max_tokens
        )
        assert not fits or _split_links(messages, longer), f"the suffix from {longer} was safe and fit"


def test_without_limits_every_message_is_kept() -> None:
    messages = [Message("user", [Content.from_text("hi")]), Message("assistant", [Content.from_text("hello")])]
    assert window_messages(messages) == messages


def test_a_call_and_its_results_stay_together() -> None:
    call = Message(
        "assistant", [Content.from_function_call("c1", "GetDateTime"), Content.from_function_call("c2", "GetDateTime")]
    )
    results = [
        Message("tool", [Content.from_function_result("c1", result="1")]),
        Message("tool", [Content.from_function_result("c2", result="2")]),
    ]
    answer = Message("assistant", [Content.from_text("done")])
    messages = [Message("user", [Content.from_text("q")]), call, *results, answer]
    assert window_messages(messages, max_messages=1) == [answer]
    assert window_messages(messages, max_messages=2) == [answer]  # [result c2, answer] would lack the call
    assert window_messages(messages, max_messages=3) == [answer]
    assert window_messages(messages, max_messages=4) == [call, *results, answer]


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        window_messages([], max_messages=-1)
    with pytest.raises(ValueError):
        window_messages([], max_tokens=-1)
