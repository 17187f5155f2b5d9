"""``python -m chatlab llm check`` against a real server over HTTP: the offline model, which calls tools, and the same
model asked for as ``chatlab-offline-notools``, which never does."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from chatlab.cli import main
from chatlab.runner import BackgroundServer
from chatlab.tutorial.offline_model import NO_TOOLS_MODEL_ID, OFFLINE_MODEL_ID, create_offline_app


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_CHAT_COMPLETION_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """The offline model's OpenAI-compatible endpoint, as a learner's server would be."""
    with BackgroundServer(create_offline_app(), name="test-check-endpoint") as server:
        yield f"{server.url}/v1"


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    """The command's exit status and printed lines."""
    status = main(["llm", "check", *args])
    return status, capsys.readouterr().out.splitlines()


def test_a_model_that_calls_tools_passes(endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, lines = check(capsys, endpoint, "--model", OFFLINE_MODEL_ID)
    assert status == 0, lines
    assert [line.split(":")[0] for line in lines[1:-1]] == [
        "[ok] the server's models",
        "[ok] a plain chat",
        "[ok] the tool call",
        "[ok] an answer after the tool result",
        "[ok] the output bound",
    ]
    assert "with the tool's time" in lines[4]
    can_run = "can run the article: it called GetDateTime and answered with its result."
    assert lines[-1] == f"{OFFLINE_MODEL_ID} at {endpoint} {can_run}"


def test_a_model_that_calls_no_tool_fails_and_says_what_it_means(
    endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = check(capsys, endpoint, "--model", NO_TOOLS_MODEL_ID)
    assert status == 1
    text = "\n".join(lines)
    assert "[FAIL] the tool call: the model answered without calling GetDateTime" in text
    assert "2 → 4 → 6 / 2 messages instead of 4 → 8 → 10 / 4" in text
    assert "what to try: The article needs a model trained for tool use" in text
    assert "[??] an answer after the tool result: not tested" in text
    assert "[ok] the output bound" in text  # the rest is still checked
    cannot_run = "cannot run the article as written (failed: the tool call); see docs/llm.md."
    assert lines[-1] == f"{NO_TOOLS_MODEL_ID} at {endpoint} {cannot_run}"


def test_the_model_and_server_come_from_the_tutorials_settings(
    endpoint: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", endpoint)
    monkeypatch.setenv("OPENAI_CHAT_COMPLETION_MODEL", NO_TOOLS_MODEL_ID)
    status, lines = check(capsys)
    assert status == 1 and lines[0] == f"Checking {NO_TOOLS_MODEL_ID} at {endpoint} with the article's agent " + (
        "(this runs the model a few times)."
    )


def test_a_model_the_server_does_not_serve(endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, lines = check(capsys, endpoint)  # the article's model, which this server does not list
    assert status == 1 and len(lines) == 4
    assert lines[1] == (
        f"[FAIL] the server's models: the server lists {OFFLINE_MODEL_ID}, {NO_TOOLS_MODEL_ID}, not openai/gpt-oss-20b."
    )
    assert lines[2].strip() == "what to try: give one it lists: --model NAME (or set OPENAI_CHAT_COMPLETION_MODEL)"


def test_no_server(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    status, lines = check(capsys, dead)
    assert status == 1 and lines[1].startswith(f"[FAIL] the server's models: GET {dead}/models did not answer")
    assert "start the server" in lines[2]


def test_the_exit_status_is_the_commands(endpoint: str) -> None:
    """As a learner (or the notebooks' check) runs it, in its own process."""
    command = [sys.executable, "-m", "chatlab", "llm", "check", endpoint, "--model"]
    calls = subprocess.run([*command, OFFLINE_MODEL_ID], capture_output=True, text=True, timeout=120)
    assert calls.returncode == 0, calls.stdout + calls.stderr
    refuses = subprocess.run([*command, NO_TOOLS_MODEL_ID], capture_output=True, text=True, timeout=120)
    assert refuses.returncode == 1 and "Traceback" not in refuses.stderr
