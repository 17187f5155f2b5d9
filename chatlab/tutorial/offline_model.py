"""The offline tutorial model: a tiny, deterministic, OpenAI-compatible chat-completions server (JSON or SSE).

It lets the tutorial run without LM Studio and says what it is. A date/time question calls the date/time tool offered;
a tool result is answered in the user's language; "how long since the first time?" is computed from the times **found
in the messages sent** (so a provider that loads nothing makes it visibly wrong); "summarize" keeps every tool time.
An agent whose instructions name it a planner or a worker plays that part (:mod:`.team`'s agents): the planner plans
the user's newest question, the worker says which plan it was sent and how (its own turn or another agent's words).
Asked for as ``chatlab-offline-notools`` it never calls a tool, like a model that cannot; either name honours the
output bound (``max_completion_tokens`` or ``max_tokens``), ending a longer answer with ``finish_reason: "length"``.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from ..runner import BackgroundServer

OFFLINE_MODEL_ID = "chatlab/offline-tutorial-model"
NO_TOOLS_MODEL_ID = "chatlab-offline-notools"  # the same model, never calling a tool (a model that cannot)
LABEL_JA = "（オフライン・チュートリアルモデル）"
LABEL_EN = "(offline tutorial model)"

_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}")
_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
_ASKS_ELAPSED = re.compile(
    r"経過|どれくらい|どのくらい|何秒|何分|\b(?:how long|elapsed|time has passed|since the first)\b", re.IGNORECASE
)
_MENTIONS_FIRST = re.compile(r"最初|初め|はじめ|1回目|\b(?:first|earlier|previous)\b", re.IGNORECASE)
_ASKS_TIME = re.compile(
    r"時刻|日時|日付|時間|何時|今日|\b(?:what time|current time|the time|date|clock|today|now)\b", re.IGNORECASE
)
_TIME_TOOL = re.compile(r"date|time|clock|日時|時刻|日付", re.IGNORECASE)
_ASKS_SUMMARY = re.compile(r"要約|まとめて|\b(?:summari[sz]e|summary)\b", re.IGNORECASE)
SUMMARY_LABEL_JA = "【これまでの会話の要約】"
SUMMARY_LABEL_EN = "[Summary of the conversation so far]"
_PART = re.compile(r"\b(planner|worker)\b", re.IGNORECASE)  # the part an agent's instructions give it
_ATTRIBUTED = re.compile(r"^\[([^\]]+)\] ")  # another agent's words given as input: "[Planner] ..."
PLAN_PREFIX = "Plan for"


@dataclass
class Reply:
    """What the model decided: text, or one call of a tool (always without arguments)."""

    text: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    cut: bool = False  #: the text was cut at the output bound

    @property
    def finish_reason(self) -> str:
        """OpenAI's reason: a tool call, the output bound reached, or a finished answer."""
        if self.tool_name:
            return "tool_calls"
        return "length" if self.cut else "stop"

    def bounded(self, max_tokens: int | None) -> Reply:
        """This reply with its text cut to ``max_tokens`` tokens (as :func:`_tokens` counts them)."""
        if max_tokens is None or self.text is None or _tokens(self.text) <= max_tokens:
            return self
        return Reply(self.text[: max_tokens * 4], self.tool_name, self.tool_call_id, cut=True)


def decide(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: Any = None,
    calls_tools: bool = True,
) -> Reply:
    """Decide the next assistant turn from an OpenAI ``messages`` list and the ``tools`` offered (never calling one
    when ``calls_tools`` is false)."""
    last_user = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None)
    if last_user is None:
        return Reply(text=f"{LABEL_EN} There is no user message to answer.")
    question = _text_of(messages[last_user])
    ja = bool(_JAPANESE.search(question))

    part = _part(messages)
    if part is not None:
        return _planner_reply(messages) if part == "planner" else _worker_reply(messages)

    if _ASKS_SUMMARY.search(question):  # in the conversation's language, whatever the request's
        before = messages[:last_user]
        return _summary_reply(before, any(_JAPANESE.search(_text_of(m)) for m in before if m.get("role") == "user"))

    if _ASKS_ELAPSED.search(question) and _MENTIONS_FIRST.search(question):
        return _elapsed_reply(_tool_datetimes(messages), ja)

    if _ASKS_TIME.search(question):
        fresh = _tool_datetimes(messages[last_user + 1 :])  # since the question
        if fresh:
            return Reply(
                text=f"現在の日時は **{fresh[-1]}** です。" if ja else f"The current date and time is **{fresh[-1]}**."
            )
        time_tool = None if tool_choice == "none" else _find_time_tool(tools or [])
        if time_tool and calls_tools:
            calls = sum(len(m.get("tool_calls") or []) for m in messages)
            return Reply(tool_name=time_tool, tool_call_id=f"call_{calls + 1}")
        if time_tool:
            if ja:
                cannot = f"このモデルはツールを呼び出せないため、{time_tool}で現在の日時を取得できません。"
                return Reply(text=LABEL_JA + cannot)
            return Reply(text=f"{LABEL_EN} This model cannot call tools, so it cannot ask {time_tool} for the time.")
        if ja:
            return Reply(text=f"{LABEL_JA}日時を取得するツールが渡されていないため、現在の日時はわかりません。")
        return Reply(text=f"{LABEL_EN} No date/time tool was offered, so I cannot tell the current time.")

    if ja:
        return Reply(
            text=f"{LABEL_JA}このモデルは日時の取得と経過時間の計算だけに答えます。「現在時刻を教えてください」と聞いてください。"
        )
    return Reply(
        text=f"{LABEL_EN} I only answer questions about the current date/time and the time elapsed "
        'since then. Try: "What time is it now?"'
    )


def _part(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """``"planner"`` or ``"worker"`` when the instructions (system or developer messages) name one."""
    for m in messages:
        found = _PART.search(_text_of(m)) if m.get("role") in ("system", "developer") else None
        if found:
            return found.group(1).lower()
    return None


def _users_question(messages: Sequence[Mapping[str, Any]]) -> str:
    """The newest user message that is not another agent's words given as input."""
    for m in reversed(messages):
        if m.get("role") == "user" and not _ATTRIBUTED.match(_text_of(m)):
            return _text_of(m)
    return ""


def _planner_reply(messages: Sequence[Mapping[str, Any]]) -> Reply:
    """A plan for the user's newest question, numbered by the plans already in what it was sent."""
    number = 1 + sum(PLAN_PREFIX in _text_of(m) for m in messages if m.get("role") in ("assistant", "user"))
    return Reply(
        text=f'{PLAN_PREFIX} "{_users_question(messages)}" (plan {number}): 1. look it up 2. answer in one line'
    )


def _worker_reply(messages: Sequence[Mapping[str, Any]]) -> Reply:
    """The user's question done, saying where the newest plan came from: its view decides what the worker sees."""
    question = _users_question(messages)
    for m in reversed(messages):
        text = _text_of(m)
        if PLAN_PREFIX not in text:
            continue
        if m.get("role") == "user" and (author := _ATTRIBUTED.match(text)):
            return Reply(text=f'Done: "{question}", following the plan {author.group(1)} gave me.')
        if m.get("role") == "assistant":
            return Reply(text=f'Done: "{question}", following a plan I was sent as an assistant turn (my own?).')
    return Reply(text=f'Done: "{question}", without a plan: none was in what I was sent.')


def _summary_reply(before: Sequence[Mapping[str, Any]], ja: bool) -> Reply:
    """What the user asked (in order, each once) and every time a tool returned, verbatim."""
    asked = list(dict.fromkeys(_text_of(m) for m in before if m.get("role") == "user" and _text_of(m)))
    times = _tool_datetimes(before)
    if ja:
        lines = [SUMMARY_LABEL_JA, "ユーザーの質問: " + (" / ".join(asked) or "なし")]
        lines.append("ツールで取得した時刻: " + ("、".join(times) if times else "なし"))
    else:
        lines = [SUMMARY_LABEL_EN, "The user asked: " + (" / ".join(asked) or "nothing")]
        lines.append("Times returned by tools: " + (", ".join(times) if times else "none"))
    return Reply(text="\n".join(lines))


def _elapsed_reply(found: list[str], ja: bool) -> Reply:
    if len(found) < 2:
        seen = f"（{found[0]}）" if found else ""
        if ja:
            what = f"取得した時刻が1つ{seen}しかない" if found else "以前に取得した時刻が見つからない"
            return Reply(text=f"{LABEL_JA}この会話の履歴には{what}ため、経過時間を計算できません。")
        what = f"only one time ({found[0]})" if found else "no earlier time"
        return Reply(
            text=f"{LABEL_EN} The conversation I was sent holds {what}, so I cannot tell how much time has passed."
        )
    first, last = found[0], found[-1]
    seconds = int((datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds())
    if ja:
        elapsed = _duration(seconds, ("時間", "分", "秒"))
        return Reply(
            text=f"最初に取得した時刻（{first}）から、今回の取得時刻（{last}）まで **{elapsed}** が経過しています。"
        )
    elapsed = _duration(seconds, ("h", "min", "seconds"))
    return Reply(text=f"From the first time I got ({first}) to the latest ({last}), **{elapsed}** have passed.")


def _duration(seconds: int, units: tuple[str, str, str]) -> str:
    h, rest = divmod(abs(seconds), 3600)
    m, s = divmod(rest, 60)
    parts = [f"{h} {units[0]}" if h else "", f"{m} {units[1]}" if m else ""]
    parts.append(f"{s} {units[2]}" if s or not (h or m) else "")
    return ("-" if seconds < 0 else "") + " ".join(p for p in parts if p)


def _text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _tool_datetimes(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Date/time values returned by tools (or kept by a summary of earlier ones), in conversation order."""
    found: list[str] = []
    for m in messages:
        text = _text_of(m)
        if m.get("role") == "tool" or text.startswith((SUMMARY_LABEL_JA, SUMMARY_LABEL_EN)):
            found.extend(_DATETIME.findall(text))
    return found


def _find_time_tool(tools: Sequence[Mapping[str, Any]]) -> str | None:
    for t in tools:
        fn = (t.get("function") if isinstance(t, Mapping) else None) or {}
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if isinstance(name, str) and _TIME_TOOL.search(f"{name} {fn.get('description') or ''}"):
            return name
    return None


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4) if text else 0  # about 4 characters a token


def _usage(messages: Sequence[Mapping[str, Any]], reply: Reply) -> dict[str, int]:
    prompt = _tokens(json.dumps(list(messages), ensure_ascii=False))
    completion = _tokens(reply.text or "") + (_tokens(reply.tool_name + "{}") if reply.tool_name else 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion_json(reply: Reply, completion_id: str, created: int, usage: dict[str, int]) -> dict[str, Any]:
    """A ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_name:
        function = {"name": reply.tool_name, "arguments": "{}"}
        message["tool_calls"] = [{"id": reply.tool_call_id, "type": "function", "function": function}]
    choice = {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
    head = {"id": completion_id, "object": "chat.completion", "created": created, "model": OFFLINE_MODEL_ID}
    return {**head, "choices": [choice], "usage": usage}


def completion_chunks(reply: Reply, completion_id: str, created: int, usage: dict[str, int] | None) -> Iterator[str]:
    """The same answer as ``chat.completion.chunk`` SSE events, ending with ``[DONE]``."""
    head = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": OFFLINE_MODEL_ID}

    def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        chunk = {**head, "choices": [choice], **extra}  # the usage chunk: no choices, the usage
        return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"

    yield event({"role": "assistant", "content": ""})
    if reply.tool_name:
        call = {"index": 0, "id": reply.tool_call_id, "type": "function"}
        yield event({"tool_calls": [{**call, "function": {"name": reply.tool_name, "arguments": ""}}]})
        yield event({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})
    else:
        text = reply.text or ""
        for i in range(0, len(text), 16):
            yield event({"content": text[i : i + 16]})
    yield event({}, reply.finish_reason)
    if usage is not None:
        yield event({}, choices=[], usage=usage)
    yield "data: [DONE]\n\n"


def create_offline_app() -> FastAPI:
    """The FastAPI app of the offline model (OpenAI paths under ``/v1``)."""
    app = FastAPI(title="chatlab offline tutorial model", docs_url=None, redoc_url=None)
    numbers = itertools.count(1)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        listed = [
            {"id": model_id, "object": "model", "created": 0, "owned_by": "chatlab"}
            for model_id in (OFFLINE_MODEL_ID, NO_TOOLS_MODEL_ID)
        ]
        return {"object": "list", "data": listed}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "The request body is not JSON.")
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return _error(400, "'messages' must be a list of message objects.")
        calls_tools = body.get("model") != NO_TOOLS_MODEL_ID
        reply = decide(messages, body.get("tools"), body.get("tool_choice"), calls_tools)
        reply = reply.bounded(_output_bound(body))
        completion_id, created = f"chatcmpl-offline-{next(numbers)}", int(time.time())
        usage = _usage(messages, reply)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = completion_chunks(reply, completion_id, created, usage if include_usage else None)
            return StreamingResponse(chunks, media_type="text/event-stream")
        return completion_json(reply, completion_id, created, usage)

    return app


def _output_bound(body: Mapping[str, Any]) -> int | None:
    """The smaller of the request's ``max_completion_tokens`` and ``max_tokens``, or ``None`` when it sets neither."""
    bounds = [body.get(name) for name in ("max_completion_tokens", "max_tokens")]
    given = [bound for bound in bounds if isinstance(bound, int) and bound > 0]
    return min(given) if given else None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status_code=status)


def start_offline_model(host: str = "127.0.0.1", port: int = 0) -> BackgroundServer:
    """Start (or reuse) the offline model in a background thread; its API is at ``server.url + "/v1"``."""
    return BackgroundServer.ensure(create_offline_app, name="offline-model", host=host, port=port)
