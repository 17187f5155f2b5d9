"""The LLM connection: ``OpenAIChatCompletionClient`` on any OpenAI-compatible endpoint, or the offline model.

Settings: the argument, else MAF's variable (``OPENAI_BASE_URL``, ``OPENAI_CHAT_COMPLETION_MODEL`` or ``OPENAI_MODEL``,
``OPENAI_API_KEY``), else LM Studio's. ``CHATLAB_LLM``: ``auto`` (the endpoint if ``GET /models`` answers within a
second, else the offline model), ``offline`` or ``endpoint``. Chat Completions on purpose: the Responses client keeps
the history server-side and, with a history provider, would send it twice.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Any, Literal, cast

import httpx
from agent_framework.openai import OpenAIChatCompletionClient, OpenAIChatCompletionOptions

from ..client.errors import LLMUnavailableError
from ..runner import BackgroundServer
from ..vocabulary import LLM_VARIABLE
from .offline_model import OFFLINE_MODEL_ID, start_offline_model

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "http://localhost:1234/v1"
DEFAULT_MODEL = "openai/gpt-oss-20b"
DEFAULT_API_KEY = "sk-dummy"
MODES = ("auto", "offline", "endpoint")
OPENAI_HOSTS = ("api.openai.com", ".openai.azure.com")  # OpenAI's own APIs: max_completion_tokens only

Mode = Literal["auto", "offline", "endpoint"]


class BoundedOutputOptions(OpenAIChatCompletionOptions[Any], total=False):
    """The framework's options for OpenAI chat completions, with the OpenAI SDK's ``extra_body`` (fields added to
    the request as they are)."""

    extra_body: dict[str, Any]


@dataclass
class LLMConnection:
    """The chat client to build the agent on, and what it talks to."""

    client: OpenAIChatCompletionClient
    kind: Literal["endpoint", "offline"]
    base_url: str
    model: str
    description: str
    offline_server: BackgroundServer | None = None

    def __str__(self) -> str:
        return self.description

    async def aclose(self) -> None:
        """Close the OpenAI client's connections (the offline model keeps running)."""
        openai_client = getattr(self.client, "client", None)
        if openai_client is not None:
            await openai_client.close()


def llm_mode(mode: str | None = None) -> Mode:
    """The mode from the argument or ``CHATLAB_LLM`` (default ``auto``), validated."""
    value = (mode or os.environ.get(LLM_VARIABLE) or "auto").strip().lower()
    if value not in MODES:
        raise ValueError(f"CHATLAB_LLM={value!r} is not a mode: use one of {', '.join(MODES)}")
    return cast(Mode, value)  # one of MODES, checked above


async def connect_llm(
    mode: str | None = None,
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    probe_timeout: float = 1.0,
    announce: bool = True,
) -> LLMConnection:
    """Create the chat client for ``mode`` and say which LLM is in use."""
    chosen = llm_mode(mode)
    url, name, key = endpoint_settings(base_url, model, api_key)

    if chosen == "offline":
        connection = await _offline("CHATLAB_LLM=offline")
    else:
        problem = await probe_endpoint(url, timeout=probe_timeout)
        if problem is None:
            client = OpenAIChatCompletionClient(model=name, base_url=url, api_key=key)
            connection = LLMConnection(client, "endpoint", url, name, f"{name} at {url} (CHATLAB_LLM={chosen})")
        elif chosen == "endpoint":
            raise LLMUnavailableError(
                f"The LLM endpoint {url} does not answer ({problem}). Start LM Studio (or another "
                "OpenAI-compatible server) there, set OPENAI_BASE_URL to where it runs, "
                "or set CHATLAB_LLM=offline (or auto) to use the offline tutorial model."
            )
        else:
            connection = await _offline(f"no LLM answered at {url}/models: {problem}")
    log.info("%s", connection.description)
    if announce:
        print(f"[LLM] {connection.description}")
    return connection


def endpoint_settings(
    base_url: str | None = None, model: str | None = None, api_key: str | None = None
) -> tuple[str, str, str]:
    """The endpoint's URL, model and API key: each argument, else MAF's variable, else LM Studio's default."""
    url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    name = model or os.environ.get("OPENAI_CHAT_COMPLETION_MODEL") or os.environ.get("OPENAI_MODEL") or DEFAULT_MODEL
    key = api_key or os.environ.get("OPENAI_API_KEY") or DEFAULT_API_KEY
    return url, name, key


async def probe_endpoint(base_url: str, *, timeout: float = 1.0) -> str | None:
    """``None`` when ``GET {base_url}/models`` answers 200 in time, else why not."""
    try:
        async with httpx.AsyncClient(timeout=timeout) as http:
            response = await http.get(f"{base_url.rstrip('/')}/models")
    except httpx.TimeoutException:
        return f"no answer within {timeout:g} s"
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return None if response.status_code == 200 else f"HTTP {response.status_code}"


async def _offline(reason: str) -> LLMConnection:
    server = await asyncio.to_thread(start_offline_model)  # waits for the server: keep the loop free
    url = f"{server.url}/v1"
    client = OpenAIChatCompletionClient(model=OFFLINE_MODEL_ID, base_url=url, api_key=DEFAULT_API_KEY)
    description = (
        f"the offline tutorial model ({OFFLINE_MODEL_ID}) at {url}, not a real LLM; "
        f"{reason}. Set CHATLAB_LLM=endpoint and OPENAI_BASE_URL to use yours."
    )
    return LLMConnection(client, "offline", url, OFFLINE_MODEL_ID, description, server)


def output_bound_options(max_tokens: int, client: OpenAIChatCompletionClient) -> BoundedOutputOptions:
    """Options that bound each of ``client``'s model calls to ``max_tokens`` tokens of output, on the server it calls.

    The framework sends its ``max_tokens`` as ``max_completion_tokens``, which llama.cpp's Python server (and other
    servers written before that name) ignores; so any server but OpenAI's own also gets the same bound as
    ``max_tokens``. OpenAI refuses the two together, so it gets only the first.
    """
    if max_tokens < 1:
        raise ValueError(f"the output bound must be at least 1 token, not {max_tokens}: give a positive number")
    options: BoundedOutputOptions = {"max_tokens": max_tokens}
    if not _is_openai(str(client.client.base_url)):
        options["extra_body"] = {"max_tokens": max_tokens}
    return options


def _is_openai(base_url: str) -> bool:
    host = httpx.URL(base_url).host
    return any(host == name.lstrip(".") or host.endswith(name) for name in OPENAI_HOSTS)
