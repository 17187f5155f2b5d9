"""The viewer's files over HTTP: served with a strict policy when on, absent when off, on by default on loopback."""

from __future__ import annotations

import re

import httpx
import pytest

from chatlab.cli import _settings, build_parser
from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.service.ui import CONTENT_SECURITY_POLICY
from chatlab.stores import InMemoryChatHistoryStore


def test_the_page_and_its_files_are_served_with_a_strict_policy(http: httpx.Client) -> None:
    page = http.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    policy = page.headers["content-security-policy"]
    assert policy == CONTENT_SECURITY_POLICY
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'none'" and directives["script-src"] == "'self'"
    assert directives["connect-src"] == "'self'" and directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"

    html = page.text
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/ui/viewer.js" defer>']  # no inline script
    assert "http://" not in html and "https://" not in html  # nothing from elsewhere
    for path, media_type in (("/ui/viewer.js", "text/javascript"), ("/ui/viewer.css", "text/css")):
        response = http.get(path)
        assert response.status_code == 200 and response.headers["content-type"].startswith(media_type)
        assert "http://" not in response.text and "https://" not in response.text
    assert "/ui" not in http.get("/openapi.json").json()["paths"]  # not part of the API


def test_the_script_never_writes_html_from_strings(http: httpx.Client) -> None:
    script = http.get("/ui/viewer.js").text
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "localStorage"):
        assert sink not in script, sink


def test_the_viewer_can_be_switched_off() -> None:
    app = create_app(InMemoryChatHistoryStore(), ServiceSettings(viewer=False))
    with BackgroundServer(app, name="test-no-viewer") as server:
        assert httpx.get(f"{server.url}/ui").status_code == 404
        assert httpx.get(f"{server.url}/chat-history").status_code == 200


def test_the_viewer_setting_reads_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ServiceSettings().viewer is True
    monkeypatch.setenv("CHATLAB_VIEWER", "off")
    assert ServiceSettings().viewer is False
    monkeypatch.setenv("CHATLAB_VIEWER", "maybe")
    with pytest.raises(ValueError, match="CHATLAB_VIEWER='maybe' is not a yes/no value"):
        ServiceSettings()


@pytest.mark.parametrize(
    ("arguments", "viewer"),
    [
        ([], True),  # loopback: on
        (["--host", "0.0.0.0"], False),  # beyond loopback: off unless asked
        (["--host", "0.0.0.0", "--viewer"], True),
        (["--no-viewer"], False),
    ],
)
def test_serve_turns_the_viewer_on_by_default_only_on_loopback(
    arguments: list[str], viewer: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHATLAB_VIEWER", raising=False)
    assert _settings(build_parser().parse_args(["serve", *arguments])).viewer is viewer


def test_serve_beyond_loopback_follows_the_variable_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATLAB_VIEWER", "1")
    assert _settings(build_parser().parse_args(["serve", "--host", "0.0.0.0"])).viewer is True
