"""``python -m chatlab llm check``: can this model, on this server, run the article? Asked, not guessed.

The check sends what the article's agent sends, through the real framework: it lists the server's models, has a plain
chat, then runs the article's agent (``GetDateTime``, the article's instructions and output bound) on the article's
first prompt, so that the tool call, the tool result sent back and the answer after it are exactly the agent's. A last
request with a small output bound shows whether the server honours the bound chatlab sends. Each finding is said in
plain words, with what to try when it fails.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from agent_framework import AgentFrameworkException, AgentResponse, InMemoryHistoryProvider, Message
from agent_framework.openai import OpenAIChatCompletionClient

from .agent import MAX_OUTPUT_TOKENS, create_agent
from .demo import ARTICLE_PROMPTS
from .llm import endpoint_settings, output_bound_options

Outcome = Literal["pass", "fail", "untested"]

PLAIN_PROMPT = "こんにちは。あなたは誰ですか？一文で答えてください。"
LONG_PROMPT = "1から300までの数字を、1行に1つずつ、省略せずにすべて書いてください。"
CALL_AS_TEXT = re.compile(r'<tool_call>|"name"\s*:\s*"GetDateTime"|GetDateTime\s*\(')  # a call the server left as text
PROBE_BOUND = 16  # tokens: far fewer than LONG_PROMPT's answer needs
DOCS = "docs/llm.md"
TOOL_ADVICE = (
    "The article needs a model trained for tool use on a server that parses its tool calls: LM Studio with "
    "openai/gpt-oss-20b (the article's), or another instruct model that LM Studio marks as tool-capable; "
    f"for llama.cpp's servers, the chat format of the model's tool calls ({DOCS})."
)


@dataclass(frozen=True)
class Finding:
    """One thing the check asked the server, and what it found, in plain words."""

    name: str
    outcome: Outcome
    said: str
    advice: str = ""

    def lines(self) -> list[str]:
        """The finding as the check prints it."""
        mark = {"pass": "ok", "fail": "FAIL", "untested": "??"}[self.outcome]
        lines = [f"[{mark}] {self.name}: {self.said}"]
        if self.advice:
            lines.append(f"       what to try: {self.advice}")
        return lines


async def check_model(
    base_url: str | None = None, model: str | None = None, max_output_tokens: int = MAX_OUTPUT_TOKENS
) -> list[Finding]:
    """Ask the server at ``base_url`` (default: the tutorial's endpoint settings) what the article needs of it, the
    agent's calls bounded to ``max_output_tokens``."""
    url, name, key = endpoint_settings(base_url, model)
    listed = await _models(url, name)
    findings = [listed]
    if listed.outcome == "fail":
        return findings
    client = OpenAIChatCompletionClient(model=name, base_url=url, api_key=key)
    try:
        findings.append(await _plain_chat(client))
        findings.extend(_tool_findings(await _article_run(client, max_output_tokens)))
        findings.append(await _output_bound(client))
    except AgentFrameworkException as exc:  # the server refused or broke off a request: said, and the check ends
        said = f"a request to the server failed ({exc.__cause__ or exc})."  # the server's own words, when given
        findings.append(Finding("the server's answers", "fail", said, "read the server's log for why"))
    finally:
        await client.client.close()
    return findings


def verdict(findings: Sequence[Finding], model: str, base_url: str) -> str:
    """The check's last line: whether this model and server can run the article."""
    failed = [f.name for f in findings if f.outcome == "fail"]
    if failed:
        return f"{model} at {base_url} cannot run the article as written (failed: {', '.join(failed)}); see {DOCS}."
    return f"{model} at {base_url} can run the article: it called GetDateTime and answered with its result."


async def run_check(
    base_url: str | None = None, model: str | None = None, max_output_tokens: int = MAX_OUTPUT_TOKENS
) -> int:
    """Print each finding and the verdict; 0 when nothing failed, else 1 (the command's exit status)."""
    url, name, _ = endpoint_settings(base_url, model)
    print(f"Checking {name} at {url} with the article's agent (this runs the model a few times).")
    findings = await check_model(url, name, max_output_tokens)
    for finding in findings:
        print("\n".join(finding.lines()))
    print(verdict(findings, name, url))
    return 1 if any(f.outcome == "fail" for f in findings) else 0


async def _models(url: str, model: str) -> Finding:
    """``GET /models``: the server answers, and serves the model asked for."""
    name = "the server's models"
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:
            response = await http.get(f"{url}/models")
        response.raise_for_status()
        ids = [str(entry.get("id")) for entry in response.json().get("data", [])]
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return Finding(
            name,
            "fail",
            f"GET {url}/models did not answer with a model list ({type(exc).__name__}: {exc}).",
            "start the server (LM Studio: Developer > Start Server), or give its URL: python -m chatlab llm check "
            "http://HOST:PORT/v1",
        )
    if model not in ids:
        return Finding(
            name,
            "fail",
            f"the server lists {', '.join(ids) or 'no model'}, not {model}.",
            "give one it lists: --model NAME (or set OPENAI_CHAT_COMPLETION_MODEL)",
        )
    return Finding(name, "pass", f"the server lists {model}.")


async def _plain_chat(client: OpenAIChatCompletionClient) -> Finding:
    """A chat without tools: the model answers at all."""
    name = "a plain chat"
    options = output_bound_options(PROBE_BOUND * 8, client)
    response = await client.get_response([Message("user", [PLAIN_PROMPT])], options=options)
    if not response.text.strip():
        return Finding(name, "fail", "the model answered with no text.", "try another model, or check the server's log")
    return Finding(name, "pass", f"the model answered: {_quote(response.text)}")


async def _article_run(client: OpenAIChatCompletionClient, max_output_tokens: int) -> AgentResponse[Any]:
    """The article's agent on its first prompt, its history kept in memory (the framework's own provider)."""
    agent = create_agent(client, InMemoryHistoryProvider(), max_output_tokens=max_output_tokens)
    response: AgentResponse[Any] = await agent.run(ARTICLE_PROMPTS[0], session=agent.create_session())
    return response


def _tool_findings(response: AgentResponse[Any]) -> list[Finding]:
    """What the agent's run shows: a parsed call of GetDateTime, and an answer after the tool's result."""
    contents = [(message, content) for message in response.messages for content in message.contents]
    calls = [str(content.name) for _, content in contents if content.type == "function_call"]
    results = [str(content.result) for _, content in contents if content.type == "function_result"]
    answer = response.messages[-1].text if response.messages else ""
    if "GetDateTime" not in calls:
        said = (
            "the model wrote a tool call as text, which the server did not parse"
            if CALL_AS_TEXT.search(answer)
            else "the model answered without calling GetDateTime"
        )
        called = f" (it called {', '.join(calls)})" if calls else ""
        consequence = (
            f"{said}{called}: {_quote(answer)}. The article's run would then store 2 → 4 → 6 / 2 messages instead "
            "of 4 → 8 → 10 / 4, and its times would not come from the tool."
        )
        untested = "not tested: there was no tool result to answer after."
        return [
            Finding("the tool call", "fail", consequence, TOOL_ADVICE),
            Finding("an answer after the tool result", "untested", untested),
        ]
    parsed = Finding("the tool call", "pass", "the model called GetDateTime and the server parsed the call.")
    if not answer.strip() or response.messages[-1].role != "assistant":
        return [
            parsed,
            Finding(
                "an answer after the tool result",
                "fail",
                "the framework sent GetDateTime's result back, and the model gave no answer after it.",
                f"try another model, or the server's chat format for tool results ({DOCS})",
            ),
        ]
    with_time = "with the tool's time" if any(result in answer for result in results) else "without the tool's time"
    said = f"the model answered {_quote(answer)}, {with_time}."
    return [parsed, Finding("an answer after the tool result", "pass", said)]


async def _output_bound(client: OpenAIChatCompletionClient) -> Finding:
    """A long answer asked for under a small bound (sent as chatlab sends the article's): is it cut there?"""
    name = "the output bound"
    options = output_bound_options(PROBE_BOUND, client)
    response = await client.get_response([Message("user", [LONG_PROMPT])], options=options)
    produced = (response.usage_details or {}).get("output_token_count")
    if response.finish_reason == "length" or (produced is not None and produced <= PROBE_BOUND):
        if response.finish_reason == "length":
            return Finding(name, "pass", f"asked for at most {PROBE_BOUND} tokens, the server stopped there.")
        return Finding(
            name, "untested", f"the answer ended by itself within {PROBE_BOUND} tokens, before the bound was reached."
        )
    count = f"{produced} tokens" if produced is not None else f"{len(response.text)} characters"
    return Finding(
        name,
        "fail",
        f"asked for at most {PROBE_BOUND} tokens (as max_completion_tokens and max_tokens), the server returned "
        f"{count}: one turn of the agent could run until the model's context is full.",
        f"set the server's own limit on generated tokens ({DOCS})",
    )


def _quote(text: str, limit: int = 80) -> str:
    """``text`` on one line, cut to ``limit`` characters, in quotes."""
    flat = " ".join(text.split())
    return f"“{flat[:limit]}…”" if len(flat) > limit else f"“{flat}”"
