// The conversation viewer: reads the service's API (same origin, GET only) and shows it.
// Every piece of data reaches the page through textContent or text nodes, never as HTML.
"use strict";
(() => {
  const PAGE = 100; // messages per page (?after=N&limit=PAGE)
  const KEY_STORE = "chatlab.viewer.apiKey"; // sessionStorage: this tab only
  const FORK_OF = "chatlab.forkOf"; // the tags a fork carries: its origin's key, and through which message
  const FORK_THROUGH = "chatlab.forkThrough";
  const $ = (id) => document.getElementById(id);

  /** Conversations per page of the list (GET /chat-history?limit=N): 100, or /ui?pageSize=N (1 to 1000). */
  const LIST_PAGE = (() => {
    const asked = Number(new URLSearchParams(window.location.search).get("pageSize"));
    return Number.isInteger(asked) && asked >= 1 && asked <= 1000 ? asked : 100;
  })();

  let memoryKey = null; // where the key lives when sessionStorage is unavailable
  let view = null; // "list" or "conversation"
  let page = null; // the conversation page shown: {key, summary, start, count, generation, shown, calls}
  let listed = { next: null, count: 0 }; // the list: the path of its next page (Link rel=next), rows shown
  const known = new Map(); // key -> the summary the list gave (title, tags)

  class AuthError extends Error {}

  // -- elements ------------------------------------------------------------------------------

  /** An element with a class and children (strings become text nodes). */
  function el(tag, className, ...children) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  function details(className, summary, open, ...body) {
    const node = el("details", `content ${className}`, el("summary", null, ...summary), el("div", null, ...body));
    node.open = open;
    return node;
  }

  function pre(value) {
    return el("pre", null, typeof value === "string" ? value : JSON.stringify(value, null, 2));
  }

  function status(text, isError = false) {
    $("status").textContent = text;
    $("status").className = isError ? "error" : "";
  }

  function formatTime(value) {
    const date = new Date(value);
    return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
  }

  // -- the API key ---------------------------------------------------------------------------

  function apiKey() {
    try {
      return window.sessionStorage.getItem(KEY_STORE);
    } catch {
      return memoryKey;
    }
  }

  function setApiKey(key) {
    memoryKey = key;
    try {
      if (key === null) window.sessionStorage.removeItem(KEY_STORE);
      else window.sessionStorage.setItem(KEY_STORE, key);
    } catch {
      /* storage disabled: the key stays in memory */
    }
    $("forget-key").hidden = key === null;
  }

  function askForKey(message) {
    $("key-message").textContent = message;
    $("key-message").className = "error";
    $("key-form").hidden = false;
    $("list-view").hidden = true;
    $("conversation-view").hidden = true;
    $("key-input").focus();
  }

  // -- the API -------------------------------------------------------------------------------

  async function problemDetail(response) {
    try {
      const problem = await response.json();
      return problem.detail || problem.title || response.statusText;
    } catch {
      return response.statusText;
    }
  }

  /** GET a path of the service; a 401 becomes an AuthError, any other refusal an Error saying why. */
  async function get(path) {
    const headers = { Accept: "application/json" };
    const key = apiKey();
    if (key) headers.Authorization = `Bearer ${key}`;
    let response;
    try {
      response = await fetch(path, { headers, credentials: "omit", cache: "no-store" });
    } catch (error) {
      throw new Error(`The service does not answer (${error.message}): is it still running?`);
    }
    if (response.status === 401) {
      const detail = await problemDetail(response);
      if (key) {
        setApiKey(null);
        throw new AuthError(`The service refused this API key (${detail}). Enter a valid key.`);
      }
      throw new AuthError(`This service needs an API key (${detail}). Enter one to see your conversations.`);
    }
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}: ${await problemDetail(response)}`);
    return response;
  }

  /** The raw text of each message of a JSON array of objects, as the service sent it. */
  function splitObjects(text) {
    const items = [];
    let depth = 0;
    let start = -1;
    let inString = false;
    let escaped = false;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (c === "\\") escaped = true;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === "{" || c === "[") {
        if (depth === 1 && c === "{") start = i;
        depth++;
      } else if (c === "}" || c === "]") {
        depth--;
        if (depth === 1 && c === "}") items.push(text.slice(start, i + 1));
      }
    }
    return items;
  }

  async function readMessages(response) {
    const text = await response.text();
    const messages = JSON.parse(text);
    let raws = splitObjects(text);
    if (raws.length !== messages.length) raws = messages.map((m) => JSON.stringify(m));
    return messages.map((message, i) => ({ message, raw: raws[i] }));
  }

  function generationOf(etag) {
    const tag = (etag || "").replace(/^"|"$/g, "");
    return tag === "0" ? null : tag.slice(0, tag.lastIndexOf("."));
  }

  function conversationPath(key, after, limit) {
    return `/chat-history/${encodeURIComponent(key)}?after=${after}&limit=${limit}`;
  }

  function conversationLink(key, text, className = null) {
    const link = el("a", className, text);
    link.href = `#/c/${encodeURIComponent(key)}`;
    return link;
  }

  /** The path of the next page from a `Link: <...>; rel="next"` header (only a listing of this service), or null. */
  function nextPage(response) {
    for (const part of (response.headers.get("Link") || "").split(/,(?=\s*<)/)) {
      const match = /^\s*<([^>]*)>(.*)$/.exec(part);
      if (!match || !/;\s*rel="?next"?\s*(;|$)/i.test(match[2])) continue;
      const url = new URL(match[1], window.location.href);
      if (url.origin === window.location.origin && url.pathname === "/chat-history") return url.pathname + url.search;
    }
    return null;
  }

  /** The summary of one conversation (its title and tags), or null: the list from just before its key, where
   * it comes first unless other keys start with the same characters (a few pages at most are read). */
  async function findSummary(key) {
    const chars = Array.from(key);
    const before = chars.slice(0, -1).join("");
    let path = `/chat-history?limit=100${before ? `&after=${encodeURIComponent(before)}` : ""}`;
    for (let pages = 0; path && pages < 5; pages++) {
      const response = await get(path);
      for (const summary of await response.json()) {
        if (summary.conversationKey === key) return summary;
      }
      path = nextPage(response);
    }
    return null;
  }

  // -- the list ------------------------------------------------------------------------------

  async function showList() {
    const response = await get(`/chat-history?limit=${LIST_PAGE}`);
    const summaries = await response.json();
    view = "list";
    page = null;
    known.clear();
    listed = { next: nextPage(response), count: 0 };
    $("conversations").tBodies[0].replaceChildren();
    addRows(summaries);
    $("empty").hidden = summaries.length > 0;
    $("list-view").hidden = false;
    $("conversation-view").hidden = true;
    document.title = "Chat history";
  }

  /** The next page of the list, added below the rows shown; the focus goes to the first new conversation. */
  async function showMore() {
    if (!listed.next) return;
    const response = await get(listed.next);
    const summaries = await response.json();
    listed.next = nextPage(response);
    const rows = addRows(summaries);
    const first = rows.length ? rows[0].querySelector("a") : null;
    if (first) first.focus();
  }

  function addRows(summaries) {
    const rows = summaries.map(summaryRow);
    for (const summary of summaries) known.set(String(summary.conversationKey), summary);
    $("conversations").tBodies[0].append(...rows);
    listed.count += rows.length;
    const { count, next } = listed;
    $("more").hidden = next === null;
    status(`${count} conversation${count === 1 ? "" : "s"}${next === null ? "." : " shown; there are more."}`);
    return rows;
  }

  function titleOf(summary) {
    return typeof summary.title === "string" && summary.title !== "" ? summary.title : null;
  }

  function tagsOf(summary) {
    const tags = summary.tags && typeof summary.tags === "object" ? summary.tags : {};
    return Object.entries(tags).map(([name, value]) => [name, String(value)]);
  }

  /** "fork of KEY through message N" (a link to the origin), from a fork's tags; null for any other. */
  function forkNode(summary) {
    const tags = Object.fromEntries(tagsOf(summary));
    if (!(FORK_OF in tags)) return null;
    const through = FORK_THROUGH in tags ? ` through message ${tags[FORK_THROUGH]}` : "";
    return el("div", "fork", "fork of ", conversationLink(tags[FORK_OF], tags[FORK_OF], "key"), through);
  }

  /** The tags (but a fork's own two, shown by forkNode) as a list of "name: value", ordered by name. */
  function tagsNode(summary) {
    const tags = tagsOf(summary).filter(([name]) => name !== FORK_OF && name !== FORK_THROUGH);
    if (tags.length === 0) return null;
    tags.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return el("ul", "tags", ...tags.map(([name, value]) => el("li", "tag", `${name}: ${value}`)));
  }

  /** Who took part, as the service ranks them (most messages first): "Planner · 2" for each author; null if none. */
  function participantsNode(summary) {
    const rows = Array.isArray(summary.participants) ? summary.participants : [];
    if (rows.length === 0) return null;
    const items = rows.map((row) => el("li", "participant", `${String(row.authorName)} · ${Number(row.messageCount)}`));
    return el("ul", "participants", ...items);
  }

  function summaryRow(summary) {
    const key = String(summary.conversationKey);
    const title = titleOf(summary);
    const written = summary.updatedAt ?? summary.createdAt;
    return el(
      "tr",
      null,
      el(
        "td",
        "conversation",
        conversationLink(key, title ?? key, title === null ? "key" : "title"),
        title === null ? null : el("div", "key muted", key),
        forkNode(summary),
        tagsNode(summary),
        participantsNode(summary),
      ),
      el("td", "number", Number(summary.messageCount).toLocaleString()),
      el("td", null, written ? formatTime(written) : "—"),
    );
  }

  // -- a conversation ------------------------------------------------------------------------

  async function showConversation(key, start) {
    let response = await get(conversationPath(key, start, PAGE));
    let count = Number(response.headers.get("X-Message-Count"));
    if (start > 0 && start >= count) {
      start = lastStart(count); // the page asked for is past the end: show the last one
      response = await get(conversationPath(key, start, PAGE));
      count = Number(response.headers.get("X-Message-Count"));
    }
    const items = await readMessages(response);
    const summary = page && page.key === key ? page.summary : known.get(key) ?? (await findSummary(key).catch(() => null));
    view = "conversation";
    const generation = generationOf(response.headers.get("ETag"));
    page = { key, summary, start, count, generation, shown: 0, calls: new Map() };
    showHeading(key, summary);
    $("messages").replaceChildren();
    $("messages").start = start + 1;
    appendMessages(items);
    $("list-view").hidden = true;
    $("conversation-view").hidden = false;
    status(count === 0 ? "This conversation holds no messages." : "");
  }

  /** The conversation's title (when it has one) over its key, what it is a fork of, its tags and who took part. */
  function showHeading(key, summary) {
    const title = summary ? titleOf(summary) : null;
    $("conversation-title").textContent = title ?? "";
    $("conversation-title").hidden = title === null;
    $("conversation-key").textContent = key;
    const meta = summary ? [forkNode(summary), tagsNode(summary), participantsNode(summary)] : [];
    $("conversation-meta").replaceChildren(...meta.filter(Boolean));
    document.title = `${title ?? key} — chat history`;
  }

  function lastStart(count) {
    return count === 0 ? 0 : Math.floor((count - 1) / PAGE) * PAGE;
  }

  function updatePager() {
    const { start, count, shown } = page;
    $("range").textContent =
      count === 0 ? "no messages" : `messages ${start + 1} to ${start + shown} of ${count.toLocaleString()}`;
    $("first").disabled = $("previous").disabled = start === 0;
    $("next").disabled = $("last").disabled = start + PAGE >= count;
  }

  function appendMessages(items) {
    const list = $("messages");
    items.forEach(({ message, raw }) => list.append(messageItem(message, raw, page.start + page.shown++)));
    updatePager();
  }

  /** The N of a summary checkpoint ("chatlab.summaryThrough" in additionalProperties), or null. */
  function summaryThrough(message) {
    const extra = message.additionalProperties;
    const through = extra && typeof extra === "object" ? extra["chatlab.summaryThrough"] : undefined;
    return Number.isInteger(through) && through >= 0 ? through : null;
  }

  function messageItem(message, raw, position) {
    const role = typeof message.role === "string" ? message.role : "unknown";
    const through = summaryThrough(message);
    const item = el("li", `message role-${/^[a-z]+$/.test(role) ? role : "other"}${through === null ? "" : " checkpoint"}`);
    const json = el("pre", "raw", raw);
    json.hidden = true;
    const toggle = el("button", null, "JSON");
    toggle.type = "button";
    toggle.title = "Show this message's MEAI ChatMessage JSON, as stored";
    toggle.addEventListener("click", () => {
      json.hidden = !json.hidden;
    });
    item.append(
      el(
        "div",
        "meta",
        el("span", "role", role),
        message.authorName ? el("span", "author", String(message.authorName)) : null,
        message.createdAt ? el("span", null, formatTime(message.createdAt)) : null,
        el("span", null, `#${position + 1}`),
        through === null ? null : el("span", "badge", `summary of messages 1–${through}`),
        toggle,
      ),
    );
    const contents = Array.isArray(message.contents) ? message.contents : [];
    for (const content of contents) item.append(contentNode(content));
    item.append(json);
    return item;
  }

  /** One content of a message, by its MEAI "$type"; tool calls get a slot their result fills. */
  function contentNode(content) {
    const type = content && content.$type;
    switch (type) {
      case "text":
        return el("div", "text", String(content.text ?? ""));
      case "functionCall":
        return toolCall(content);
      case "functionResult":
        return toolResult(content);
      case "reasoning":
        return details("reasoning", [el("span", "label", "Reasoning")], false, el("div", "text", String(content.text ?? "")));
      case "data":
        return el("div", null, el("span", "label", "Data"), describeData(content));
      case "uri":
        return el("div", null, el("span", "label", "URI"), `${content.uri ?? ""} ${content.mediaType ? `(${content.mediaType})` : ""}`);
      case "error":
        return el("div", "text", el("span", "label", "Error"), `${content.errorCode ? `[${content.errorCode}] ` : ""}${content.message ?? ""}${content.details ? ` — ${content.details}` : ""}`);
      case "usage":
        return el("div", null, el("span", "label", "Usage"), describeUsage(content.details || {}));
      default:
        return details("other", [el("span", "label", String(type ?? "content without $type"))], false, pre(content));
    }
  }

  function describeData(content) {
    const uri = String(content.uri ?? "");
    const media = /^data:([^;,]*)/.exec(uri);
    const comma = uri.indexOf(",");
    const size = comma < 0 ? 0 : Math.floor(((uri.length - comma - 1) * 3) / 4);
    return `${content.name ?? "(unnamed)"} — ${media && media[1] ? media[1] : content.mediaType ?? "unknown type"}, about ${size.toLocaleString()} bytes`;
  }

  function describeUsage(details) {
    const parts = [["input", details.inputTokenCount], ["output", details.outputTokenCount], ["total", details.totalTokenCount]];
    return parts.filter(([, n]) => n !== undefined && n !== null).map(([name, n]) => `${name} ${n}`).join(", ") + " tokens";
  }

  function toolCall(content) {
    const name = String(content.name ?? "(unnamed tool)");
    const slot = el("div", "tool-result", el("span", "missing", "No result on this page yet."));
    const node = details(
      "tool-call",
      [el("span", "label", "Tool call"), el("strong", null, name), " ", el("span", "call-id", String(content.callId ?? ""))],
      true,
      el("span", "label", "Arguments"),
      el("div", "tool-arguments", pre(content.arguments ?? {})),
      el("span", "label", "Result"),
      slot,
    );
    if (content.callId !== undefined) page.calls.set(String(content.callId), { name, slot, filled: false });
    return node;
  }

  function toolResult(content) {
    const call = page.calls.get(String(content.callId));
    if (call && !call.filled) {
      call.filled = true;
      call.slot.replaceChildren(pre(content.result ?? null));
      return el("div", "paired", `↳ result of ${call.name} `, el("span", "call-id", String(content.callId)), " (shown with its call)");
    }
    return details(
      "tool-result",
      [el("span", "label", "Tool result"), el("span", "call-id", String(content.callId ?? ""))],
      true,
      el("span", "missing", "Its call is not on this page."),
      pre(content.result ?? null),
    );
  }

  // -- refresh: only what is new -------------------------------------------------------------

  async function refresh() {
    if (view !== "conversation") return showList();
    const { key, count } = page;
    const response = await get(conversationPath(key, count, PAGE));
    const total = Number(response.headers.get("X-Message-Count"));
    if (generationOf(response.headers.get("ETag")) !== page.generation || total < count) {
      await showConversation(key, 0);
      status("The conversation was replaced or deleted since it was read: shown again from the start.");
      return;
    }
    const fresh = await readMessages(response);
    const onLastPage = page.start + page.shown === count;
    page.count = total;
    if (onLastPage) appendMessages(fresh.slice(0, PAGE - page.shown));
    else updatePager();
    const added = total - count;
    status(added === 0 ? "No new messages." : `${added} new message${added === 1 ? "" : "s"}.`);
  }

  // -- wiring --------------------------------------------------------------------------------

  /** Do an action; say what went wrong if it fails (asking for a key on a 401). True if it worked. */
  async function run(action) {
    try {
      await action();
      $("key-form").hidden = true;
      return true;
    } catch (error) {
      if (error instanceof AuthError) askForKey(error.message);
      else status(error.message, true);
      return false;
    }
  }

  async function open() {
    if (await run(describeService)) await route();
  }

  function route() {
    const match = /^#\/c\/(.+)$/.exec(window.location.hash);
    return run(() => (match ? showConversation(decodeURIComponent(match[1]), 0) : showList()));
  }

  async function describeService() {
    const info = await (await get("/")).json();
    $("service").textContent = `${info.service ?? ""} — ${info.description ?? ""}`;
  }

  function start() {
    $("forget-key").hidden = apiKey() === null;
    $("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const key = $("key-input").value.trim();
      $("key-input").value = "";
      if (!key) return;
      setApiKey(key);
      open();
    });
    $("forget-key").addEventListener("click", () => {
      setApiKey(null);
      run(showList);
    });
    $("refresh").addEventListener("click", () => run(refresh));
    $("more").addEventListener("click", () => run(showMore));
    $("first").addEventListener("click", () => run(() => showConversation(page.key, 0)));
    $("previous").addEventListener("click", () => run(() => showConversation(page.key, Math.max(0, page.start - PAGE))));
    $("next").addEventListener("click", () => run(() => showConversation(page.key, page.start + PAGE)));
    $("last").addEventListener("click", () => run(() => showConversation(page.key, lastStart(page.count))));
    window.addEventListener("hashchange", route);
    open();
  }

  start();
})();
