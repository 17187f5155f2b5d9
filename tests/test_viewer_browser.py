"""The conversation viewer (``/ui``) in a real headless Chromium, against a real service over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.stores import InMemoryChatHistoryStore
from chatlab.tutorial.samples import sample_messages, sample_turn
from tests.browser import chromium, requested_urls, wait_for

__all__ = ["chromium"]  # the fixture, imported to be found

SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "viewer.png"
ALICE_KEY = "alice-key-0123456789abcdef"
HOSTILE = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2"><b>bold?</b>'


def write(http: httpx.Client, key: str, messages: list[dict[str, Any]]) -> None:
    for start in range(0, len(messages), 1000):
        response = http.post(f"/chat-history/{key}", json={"messages": messages[start : start + 1000]})
        assert response.status_code == 202, response.text


def text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "contents": [{"$type": "text", "text": text}]}


def open_page(driver: webdriver.Chrome, url: str) -> None:
    driver.get(url)
    driver.get_log("performance")  # forget the requests of earlier pages


def messages_shown(driver: webdriver.Chrome) -> list[Any]:
    return driver.find_elements(By.CSS_SELECTOR, "#messages > li.message")


def range_text(driver: webdriver.Chrome) -> str:
    return str(driver.find_element(By.ID, "range").text)


def test_the_list_shows_the_conversations_written(
    chromium: webdriver.Chrome, service: BackgroundServer, http: httpx.Client
) -> None:
    write(http, "first-conversation", sample_messages(4))
    write(http, "second-conversation", sample_messages(10))
    open_page(chromium, f"{service.url}/ui")
    rows = wait_for(chromium, lambda d: d.find_elements(By.CSS_SELECTOR, "#conversations tbody tr"), "the list")
    cells = [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]
    shown = [(conversation.splitlines(), count) for conversation, count, _ in cells]  # its key, then who took part
    assert shown == [
        (["first-conversation", "SampleAgent · 2"], "4"),
        (["second-conversation", "SampleAgent · 5"], "10"),
    ]
    assert all(written for _, _, written in cells)  # a time once the service tells it, "—" until then
    assert "chat-history-service" in chromium.find_element(By.ID, "service").text

    rows[1].find_element(By.TAG_NAME, "a").click()
    wait_for(chromium, lambda d: len(messages_shown(d)) == 10, "the conversation's 10 messages")
    assert chromium.find_element(By.ID, "conversation-key").text == "second-conversation"


def test_a_tool_call_is_shown_with_its_result(
    chromium: webdriver.Chrome, service: BackgroundServer, http: httpx.Client
) -> None:
    write(http, "with-a-tool", sample_turn(7))
    open_page(chromium, f"{service.url}/ui#/c/with-a-tool")
    wait_for(chromium, lambda d: len(messages_shown(d)) == 4, "the 4 messages")
    user, call, result, answer = messages_shown(chromium)
    assert "role-user" in user.get_attribute("class") and "現在時刻を教えてください (turn 7)" in user.text

    tool_call = call.find_element(By.CSS_SELECTOR, "details.tool-call")
    assert tool_call.get_attribute("open") is not None  # collapsible, open to begin with
    assert "GetDateTime" in tool_call.text and "call_7" in tool_call.text
    assert tool_call.find_element(By.CSS_SELECTOR, ".tool-arguments").text == "{}"
    assert tool_call.find_element(By.CSS_SELECTOR, ".tool-result").text == "2026-04-16 01:30:52"
    assert "result of GetDateTime" in result.find_element(By.CSS_SELECTOR, ".paired").text
    assert "2026-04-16 01:30:52" in answer.find_element(By.CSS_SELECTOR, ".text").text

    tool_call.find_element(By.TAG_NAME, "summary").click()  # collapse it
    assert tool_call.get_attribute("open") is None
    assert not tool_call.find_element(By.CSS_SELECTOR, ".tool-result").is_displayed()

    compact = json.dumps(sample_turn(7)[1], ensure_ascii=False, separators=(",", ":"))
    assert compact.encode() in http.get("/chat-history/with-a-tool").content  # as the service holds it
    raw = call.find_element(By.CSS_SELECTOR, "pre.raw")
    assert not raw.is_displayed()
    call.find_element(By.CSS_SELECTOR, ".meta button").click()
    assert raw.is_displayed() and raw.text == compact


def test_a_1000_message_conversation_is_read_page_by_page(
    chromium: webdriver.Chrome, service: BackgroundServer, http: httpx.Client
) -> None:
    write(http, "long", sample_messages(1000))
    open_page(chromium, f"{service.url}/ui#/c/long")
    wait_for(chromium, lambda d: range_text(d) == "messages 1 to 100 of 1,000", "the first page")
    shown = messages_shown(chromium)
    assert len(shown) == 100 and "#1" in shown[0].text and "(turn 0)" in shown[0].text
    assert not chromium.find_element(By.ID, "previous").is_enabled()
    assert all("after=0&limit=100" in url for url in requested_urls(chromium) if "/chat-history/long" in url)

    chromium.find_element(By.ID, "next").click()
    wait_for(chromium, lambda d: range_text(d) == "messages 101 to 200 of 1,000", "the second page")
    assert "#101" in messages_shown(chromium)[0].text and "(turn 25)" in messages_shown(chromium)[0].text
    assert [u for u in requested_urls(chromium) if "/chat-history/" in u][-1].endswith("/long?after=100&limit=100")

    chromium.find_element(By.ID, "last").click()
    wait_for(chromium, lambda d: range_text(d) == "messages 901 to 1000 of 1,000", "the last page")
    assert len(messages_shown(chromium)) == 100 and "#1000" in messages_shown(chromium)[-1].text
    assert not chromium.find_element(By.ID, "next").is_enabled()

    write(http, "long", sample_turn(900))  # someone appends: the refresh fetches only that
    requested_urls(chromium)
    chromium.find_element(By.ID, "refresh").click()
    wait_for(chromium, lambda d: range_text(d) == "messages 901 to 1000 of 1,004", "the new count")
    assert chromium.find_element(By.ID, "status").text == "4 new messages."
    assert [u for u in requested_urls(chromium) if "/chat-history/" in u] == [
        f"{service.url}/chat-history/long?after=1000&limit=100"
    ]
    chromium.find_element(By.ID, "next").click()
    wait_for(chromium, lambda d: range_text(d) == "messages 1001 to 1004 of 1,004", "the page of the new messages")
    assert "(turn 900)" in messages_shown(chromium)[0].text


def test_refresh_appends_only_what_is_new(
    chromium: webdriver.Chrome, service: BackgroundServer, http: httpx.Client
) -> None:
    write(http, "growing", sample_turn(0)[:2])  # the tool call, whose result comes later
    open_page(chromium, f"{service.url}/ui#/c/growing")
    wait_for(chromium, lambda d: len(messages_shown(d)) == 2, "the first 2 messages")
    first = messages_shown(chromium)[0]
    assert "No result on this page yet" in chromium.find_element(By.CSS_SELECTOR, ".tool-result").text

    write(http, "growing", sample_turn(0)[2:])
    requested_urls(chromium)
    chromium.find_element(By.ID, "refresh").click()
    wait_for(chromium, lambda d: len(messages_shown(d)) == 4, "the 2 new messages")
    assert messages_shown(chromium)[0] == first  # the page was extended, not drawn again
    assert chromium.find_element(By.CSS_SELECTOR, ".tool-result").text == "2026-04-16 01:30:52"
    assert [u for u in requested_urls(chromium) if "/chat-history/" in u] == [
        f"{service.url}/chat-history/growing?after=2&limit=100"
    ]

    http.put("/chat-history/growing", json={"messages": [text_message("user", "replaced")]})
    chromium.find_element(By.ID, "refresh").click()
    wait_for(chromium, lambda d: len(messages_shown(d)) == 1, "the replaced conversation")
    assert "replaced" in chromium.find_element(By.ID, "status").text


def test_hostile_content_is_shown_as_text_and_never_runs(
    chromium: webdriver.Chrome, service: BackgroundServer, http: httpx.Client
) -> None:
    hostile_call = {"$type": "functionCall", "callId": HOSTILE, "name": HOSTILE, "arguments": {HOSTILE: HOSTILE}}
    write(
        http,
        "hostile",
        [
            {**text_message("user", HOSTILE), "authorName": HOSTILE},
            {
                "role": HOSTILE,
                "contents": [
                    hostile_call,
                    {"$type": "hostedFile", "fileId": HOSTILE},
                    {"$type": "error", "message": HOSTILE, "errorCode": HOSTILE},
                ],
            },
            {"role": "tool", "contents": [{"$type": "functionResult", "callId": HOSTILE, "result": HOSTILE}]},
        ],
    )
    response = http.get("/ui")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "require-trusted-types-for 'script'" in policy
    assert "unsafe-inline" not in policy and response.headers["x-content-type-options"] == "nosniff"

    open_page(chromium, f"{service.url}/ui#/c/hostile")
    wait_for(chromium, lambda d: len(messages_shown(d)) == 3, "the 3 messages")
    assert chromium.execute_script("return window.__pwned === undefined")
    assert chromium.find_element(By.CSS_SELECTOR, "#messages .text").text == HOSTILE
    assert chromium.find_elements(By.CSS_SELECTOR, "#messages script, #messages img, #messages b") == []
    assert len(chromium.find_elements(By.TAG_NAME, "script")) == 1  # the viewer's own
    assert HOSTILE in messages_shown(chromium)[0].find_element(By.CSS_SELECTOR, ".meta").text
    assert chromium.find_element(By.CSS_SELECTOR, ".tool-result").text == HOSTILE
    assert "role-other" in messages_shown(chromium)[1].get_attribute("class")
    assert HOSTILE in messages_shown(chromium)[1].text  # the error, as text; the hosted file labelled
    assert "hostedFile" in messages_shown(chromium)[1].text
    errors = [e["message"] for e in chromium.get_log("browser") if e["level"] == "SEVERE"]
    assert not [e for e in errors if "viewer.js" in e], errors  # the script did not stumble over any of it


@pytest.fixture
def keyed_service() -> Iterator[BackgroundServer]:
    settings = ServiceSettings(api_keys={ALICE_KEY: "alice"})
    with BackgroundServer(create_app(InMemoryChatHistoryStore(), settings), name="test-keyed-service") as server:
        yield server


def test_with_api_keys_a_wrong_key_gets_a_clear_message(
    chromium: webdriver.Chrome, keyed_service: BackgroundServer
) -> None:
    with httpx.Client(base_url=keyed_service.url, headers={"Authorization": f"Bearer {ALICE_KEY}"}) as alice:
        write(alice, "alices-conversation", sample_messages(4))
    open_page(chromium, f"{keyed_service.url}/ui")
    form = wait_for(chromium, lambda d: d.find_element(By.ID, "key-form").is_displayed(), "the key form")
    assert form
    assert "needs an API key" in chromium.find_element(By.ID, "key-message").text

    chromium.find_element(By.ID, "key-input").send_keys("not-the-right-key-at-all")
    chromium.find_element(By.CSS_SELECTOR, "#key-form button").click()
    wait_for(chromium, lambda d: "refused this API key" in d.find_element(By.ID, "key-message").text, "the refusal")
    assert "not valid" in chromium.find_element(By.ID, "key-message").text  # the service's own words
    assert chromium.execute_script("return sessionStorage.length + localStorage.length") == 0

    chromium.find_element(By.ID, "key-input").send_keys(ALICE_KEY)
    chromium.find_element(By.CSS_SELECTOR, "#key-form button").click()
    rows = wait_for(chromium, lambda d: d.find_elements(By.CSS_SELECTOR, "#conversations tbody tr"), "the list")
    assert [r.find_element(By.TAG_NAME, "a").text for r in rows] == ["alices-conversation"]
    assert not chromium.find_element(By.ID, "key-form").is_displayed()
    assert chromium.execute_script("return localStorage.length") == 0  # nothing outlives the tab
    assert chromium.execute_script("return Object.values(sessionStorage)") == [ALICE_KEY]
    assert ALICE_KEY not in chromium.current_url


async def article_run(url: str) -> str:
    """The article's run (the offline model), against the service at ``url``; the first session's key."""
    from chatlab.tutorial.agent import create_agent
    from chatlab.tutorial.demo import CheckedProvider, run_article_scenario
    from chatlab.tutorial.llm import connect_llm

    llm = await connect_llm("offline", announce=False)
    try:
        provider = CheckedProvider(url)
        async with provider:
            keys = await run_article_scenario(create_agent(llm.client, provider), provider, pause=1.0)
    finally:
        await llm.aclose()
    return keys[0]


def test_the_article_conversation_screenshot(
    chromium: webdriver.Chrome, service: BackgroundServer, tmp_path: Path
) -> None:
    """The article's first session in the viewer, as one picture: saved as docs/viewer.png (shown in the README)
    when ``CHATLAB_UPDATE_SCREENSHOT=1``, else in the test's temporary folder (a test run leaves the clone clean)."""
    key = asyncio.run(article_run(service.url))
    open_page(chromium, f"{service.url}/ui#/c/{key}")
    wait_for(chromium, lambda d: len(messages_shown(d)) == 10, "the article's 10 messages")
    calls = chromium.find_elements(By.CSS_SELECTOR, "details.tool-call")
    assert len(calls) == 2 and all(c.find_element(By.CSS_SELECTOR, ".tool-result pre") for c in calls)
    answer = messages_shown(chromium)[-1].find_element(By.CSS_SELECTOR, ".text").text
    assert answer.startswith("最初に取得した時刻") and "秒" in answer

    height = chromium.execute_script("return document.documentElement.scrollHeight")
    metrics = {"width": 1000, "height": height, "deviceScaleFactor": 1, "mobile": False}
    chromium.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)  # the whole page in one picture
    try:
        png = chromium.get_screenshot_as_png()
    finally:
        chromium.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert png.startswith(b"\x89PNG")
    target = SCREENSHOT if os.environ.get("CHATLAB_UPDATE_SCREENSHOT") == "1" else tmp_path / SCREENSHOT.name
    target.write_bytes(png)


def test_the_page_reads_the_api_only(chromium: webdriver.Chrome, service: BackgroundServer) -> None:
    """Same origin only, and nothing but GETs: the page writes nothing and loads nothing from elsewhere."""
    open_page(chromium, f"{service.url}/ui")
    wait_for(chromium, lambda d: d.find_element(By.ID, "list-view").is_displayed(), "the list")
    chromium.refresh()
    wait_for(chromium, lambda d: d.find_element(By.ID, "list-view").is_displayed(), "the list again")
    sent = [
        json.loads(e["message"])["message"]["params"]["request"]
        for e in chromium.get_log("performance")
        if json.loads(e["message"])["message"].get("method") == "Network.requestWillBeSent"
    ]
    assert sent and all(r["url"].startswith(f"{service.url}/") for r in sent)
    assert {r["method"] for r in sent} == {"GET"}


def test_a_summary_checkpoint_is_marked(
    chromium: webdriver.Chrome, service: BackgroundServer, http: httpx.Client
) -> None:
    checkpoint = {**text_message("assistant", "summary"), "additionalProperties": {"chatlab.summaryThrough": 2}}
    write(http, "with-a-checkpoint", [text_message("user", "a"), text_message("assistant", "b"), checkpoint])
    open_page(chromium, f"{service.url}/ui#/c/with-a-checkpoint")
    wait_for(chromium, lambda d: len(messages_shown(d)) == 3, "the 3 messages")
    first, _, last = messages_shown(chromium)
    assert "checkpoint" not in first.get_attribute("class")
    assert "checkpoint" in last.get_attribute("class")
    assert last.find_element(By.CSS_SELECTOR, ".meta .badge").text == "summary of messages 1\u20132"


def list_rows(driver: webdriver.Chrome) -> list[Any]:
    return driver.find_elements(By.CSS_SELECTOR, "#conversations tbody tr")


def listing_urls(driver: webdriver.Chrome) -> list[str]:
    return [u for u in requested_urls(driver) if "/chat-history?" in u]


def test_the_list_is_read_a_page_at_a_time(
    chromium: webdriver.Chrome, service: BackgroundServer, http: httpx.Client
) -> None:
    """``?pageSize=2``: pages of two, each the next ``Link: rel=next`` names, loaded with "Show more"."""
    for i in range(5):
        write(http, f"conv-{i}", sample_messages(1 + i))
    requested_urls(chromium)  # forget earlier pages' requests, and keep this page's first
    chromium.get(f"{service.url}/ui?pageSize=2")
    wait_for(chromium, lambda d: len(list_rows(d)) == 2, "the first page of 2")
    more = chromium.find_element(By.ID, "more")
    assert (
        more.is_displayed() and chromium.find_element(By.ID, "status").text == "2 conversations shown; there are more."
    )
    assert listing_urls(chromium) == [f"{service.url}/chat-history?limit=2"]

    more.click()
    wait_for(chromium, lambda d: len(list_rows(d)) == 4, "the second page")
    assert listing_urls(chromium) == [f"{service.url}/chat-history?limit=2&after=conv-1"]
    assert chromium.switch_to.active_element.text == "conv-2"  # the focus moves to the first new conversation
    more.click()
    wait_for(chromium, lambda d: len(list_rows(d)) == 5, "the last page")
    assert not more.is_displayed() and chromium.find_element(By.ID, "status").text == "5 conversations."
    keys = [row.find_element(By.TAG_NAME, "a").text for row in list_rows(chromium)]
    assert keys == [f"conv-{i}" for i in range(5)]  # each once, in key order

    for i in range(5, 101):  # by default, pages of 100
        write(http, f"conv-{i:03d}", sample_messages(1))
    requested_urls(chromium)
    chromium.get(f"{service.url}/ui")
    wait_for(chromium, lambda d: len(list_rows(d)) == 100, "the first 100")
    assert listing_urls(chromium) == [f"{service.url}/chat-history?limit=100"]
    chromium.find_element(By.ID, "more").click()
    wait_for(chromium, lambda d: len(list_rows(d)) == 101, "the 101st")
    assert not chromium.find_element(By.ID, "more").is_displayed()


def test_titles_tags_and_a_forks_origin_are_shown(
    chromium: webdriver.Chrome, service: BackgroundServer, http: httpx.Client
) -> None:
    write(http, "kyoto", sample_messages(6))
    write(http, "untitled", sample_messages(2))
    patch = {"title": f"Trip to Kyoto {HOSTILE}", "tags": {"lang": "ja", "user": "u42"}}
    assert http.patch("/chat-history/kyoto", json=patch).status_code == 200
    fork = http.post("/chat-history/kyoto/fork?through=4").headers["location"].rsplit("/", 1)[1]

    open_page(chromium, f"{service.url}/ui")
    wait_for(chromium, lambda d: len(list_rows(d)) == 3, "the 3 conversations")
    cells = {
        row.find_element(By.CSS_SELECTOR, "td.conversation > a").get_attribute("href").rsplit("/", 1)[1]: row
        for row in list_rows(chromium)
    }
    titled = cells["kyoto"].find_element(By.CSS_SELECTOR, "td.conversation")
    assert titled.find_element(By.CSS_SELECTOR, "a.title").text == patch["title"]  # as text: nothing runs
    assert titled.find_element(By.CSS_SELECTOR, ".key").text == "kyoto"  # the key under its title
    assert [t.text for t in titled.find_elements(By.CSS_SELECTOR, ".tags li")] == ["lang: ja", "user: u42"]
    assert chromium.execute_script("return window.__pwned === undefined")
    assert cells["untitled"].find_element(By.CSS_SELECTOR, "td.conversation > a").text == "untitled"  # the key
    forked = cells[fork].find_element(By.CSS_SELECTOR, "td.conversation")
    assert forked.find_element(By.CSS_SELECTOR, "a.key").text == fork  # no title: its key
    assert forked.find_element(By.CSS_SELECTOR, ".fork").text == "fork of kyoto through message 4"
    assert forked.find_elements(By.CSS_SELECTOR, ".tags") == []  # the fork's own tags, said in words

    forked.find_element(By.CSS_SELECTOR, ".fork a").click()  # to the origin
    wait_for(chromium, lambda d: len(messages_shown(d)) == 6, "the origin's 6 messages")
    assert chromium.find_element(By.ID, "conversation-title").text == patch["title"]
    assert chromium.find_element(By.ID, "conversation-key").text == "kyoto"
    assert chromium.title == f"{patch['title']} — chat history"

    open_page(chromium, f"{service.url}/ui#/c/{fork}")  # straight to the fork: its summary is looked up
    wait_for(chromium, lambda d: len(messages_shown(d)) == 4, "the fork's 4 messages")
    meta = wait_for(chromium, lambda d: d.find_element(By.CSS_SELECTOR, "#conversation-meta .fork"), "its origin")
    assert meta.text == "fork of kyoto through message 4"
    assert not chromium.find_element(By.ID, "conversation-title").is_displayed()
    assert chromium.find_element(By.ID, "conversation-key").text == fork


def test_each_message_shows_its_author(
    chromium: webdriver.Chrome, service: BackgroundServer, http: httpx.Client
) -> None:
    signed = [
        text_message("user", "What time is it?"),
        {**text_message("assistant", "a plan"), "authorName": "Planner"},
        {**text_message("assistant", "an answer"), "authorName": "Worker"},
    ]
    write(http, "two-agents", signed)
    open_page(chromium, f"{service.url}/ui#/c/two-agents")
    wait_for(chromium, lambda d: len(messages_shown(d)) == 3, "the 3 messages")
    authors = [m.find_elements(By.CSS_SELECTOR, ".meta .author") for m in messages_shown(chromium)]
    assert [[a.text for a in found] for found in authors] == [[], ["Planner"], ["Worker"]]


def test_who_took_part_is_shown_in_the_list_and_the_heading(
    chromium: webdriver.Chrome, service: BackgroundServer, http: httpx.Client
) -> None:
    signed = [
        text_message("user", "What time is it?"),
        {**text_message("assistant", "a plan"), "authorName": "Worker"},
        {**text_message("assistant", "an answer"), "authorName": HOSTILE},
        {**text_message("assistant", "checked"), "authorName": "Worker"},
    ]
    write(http, "team", signed)
    write(http, "alone", [text_message("user", "nobody signs")])
    expected = ["Worker · 2", f"{HOSTILE} · 1"]  # most first, as the service ranks them; a name as text

    open_page(chromium, f"{service.url}/ui")
    wait_for(chromium, lambda d: len(list_rows(d)) == 2, "the 2 conversations")
    cells = {
        row.find_element(By.CSS_SELECTOR, "td.conversation > a").text: row.find_element(By.CSS_SELECTOR, "td")
        for row in list_rows(chromium)
    }
    assert [li.text for li in cells["team"].find_elements(By.CSS_SELECTOR, ".participants li")] == expected
    assert cells["alone"].find_elements(By.CSS_SELECTOR, ".participants") == []
    assert chromium.execute_script("return window.__pwned === undefined")

    open_page(chromium, f"{service.url}/ui#/c/team")
    wait_for(chromium, lambda d: len(messages_shown(d)) == 4, "the 4 messages")
    heading = wait_for(
        chromium, lambda d: d.find_elements(By.CSS_SELECTOR, "#conversation-meta .participants li"), "who took part"
    )
    assert [li.text for li in heading] == expected
