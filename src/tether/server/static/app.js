// The page of `tether serve`: one conversation at a time, its runs read as Server-Sent Events.
//
// Everything a model or a tool wrote is untrusted. Answers go through marked and then DOMPurify
// (as a DOM fragment, never as an HTML string); every other such string (tool names, arguments,
// widget labels, reasons) is set with textContent. The CSP in index.html forbids inline script.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "tether.token";
const TOKEN_CHARS = /^[\x21-\x7e]+$/; // what an Authorization header can carry of a token
const ARGS_SHOWN = 120; // characters of a tool's arguments in its step line
const APPROVAL_ARGS_INLINE = 300; // longer arguments of a call to allow get a scrolling box of their own
// The page is the root of tether's app, which an app of the user's may mount under a prefix (the
// page then at /agents/): the API's paths, written from that root, are resolved against the page's folder.
const ROOT = new URL(".", location.href);
const at = (path) => new URL(path.replace(/^\//, ""), ROOT).href;

const state = {
  token: TOKEN_CHARS.test(sessionStorage.getItem(TOKEN_KEY) || "") ? sessionStorage.getItem(TOKEN_KEY) : "",
  agents: [],
  sessionId: null,
  view: null, // the shown conversation: {abort, turns, feedback, streams}
  making: null, // New chat's request, while it is out
};

// ---- small DOM helpers -------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, "");
    else if (value !== false && value != null) node.setAttribute(key, String(value));
  }
  node.append(...children.filter((c) => c != null));
  return node;
}

function truncate(text, n) {
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

// Characters that change how the text around them reads (its direction) or that cannot be seen:
// soft hyphen, blank fillers, variation selectors, and tags (U+E0000…), which carry text no one sees
// (a message hidden in a memo, for the next model that reads it).
const HIDDEN_CHARS = /[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2069\u3164\ufe00-\ufe0f\ufeff\uffa0\u{e0000}-\u{e0fff}]/gu;

// A call's arguments on one line, as the tool gets them: whitespace between tokens dropped, each
// string written again (so "\u0072m" reads "rm") with the characters above as escapes, numbers as
// the model wrote them (JavaScript's numbers would round 12345678901234567891 to ...000).
function compactArgs(args) {
  if (typeof args !== "string") args = JSON.stringify(args ?? {});
  try {
    JSON.parse(args);
  } catch {
    return args.replace(HIDDEN_CHARS, escapeChar); // not JSON: as it came
  }
  return args.replace(/"(?:[^"\\]|\\.)*"|\s+/g, (token) => (token.startsWith('"')
    ? JSON.stringify(JSON.parse(token)).replace(HIDDEN_CHARS, escapeChar) : ""));
}

// The keys an object of a call's arguments (compacted as above) names more than once: the tool gets
// the last value of each, while the card shows every one (a model can put a harmless one first).
function repeatedKeys(args) {
  try {
    JSON.parse(args);
  } catch {
    return [];
  }
  const repeated = new Set();
  const open = []; // per {…} or […] being read: the keys seen, null for an array
  let string = null; // the token just read, when it was a string
  for (const [token] of args.matchAll(/"(?:[^"\\]|\\.)*"|[{}[\]:]/g)) {
    if (token === "{") open.push(new Set());
    else if (token === "[") open.push(null);
    else if (token === "}" || token === "]") open.pop();
    else if (token === ":" && string && open.at(-1)) {
      if (open.at(-1).has(string)) repeated.add(string);
      open.at(-1).add(string);
    }
    string = token.startsWith('"') ? token : null;
  }
  return [...repeated];
}

function escapeChar(c) { // as JSON writes it: a character beyond U+FFFF as its two halves
  return Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, "0")}`).join("");
}

function newId(prefix) {
  const bytes = crypto.getRandomValues(new Uint8Array(12)); // randomUUID needs a secure context
  return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function nearBottom() {
  const chat = $("chat");
  return chat.scrollHeight - chat.scrollTop - chat.clientHeight < 80;
}

function keepScrolled(wasNearBottom) {
  if (wasNearBottom) $("chat").scrollTop = $("chat").scrollHeight;
}

// ---- Markdown, sanitised ------------------------------------------------------------------------

const MARKDOWN_TAGS = ["a", "p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote",
  "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
  "img", "span", "sup", "sub", "kbd", "details", "summary"];
const MARKDOWN_ATTRS = ["href", "title", "alt", "src", "start", "colspan", "rowspan", "align"];

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

// Raw HTML a model writes is shown as text, never parsed: Markdown gives it every format an answer
// needs, and markup that never reaches a parser cannot run (nor make the browser report a blocked
// handler). DOMPurify still checks what marked makes from Markdown (links, images).
const HTML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const markdown = new marked.Marked({
  gfm: true,
  breaks: true,
  renderer: { html: (token) => token.text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]) },
});

function renderMarkdown(text) {
  let frag;
  try {
    frag = DOMPurify.sanitize(markdown.parse(text), {
      ALLOWED_TAGS: MARKDOWN_TAGS, ALLOWED_ATTR: MARKDOWN_ATTRS, RETURN_DOM_FRAGMENT: true,
    });
  } catch { // nesting deeper than marked's recursion goes ("> > > …" thousands deep): the text as it is
    return el("p", { class: "plain", title: "shown as plain text: too deeply nested to render", text });
  }
  // The page loads images from itself only (its CSP): an image from elsewhere would be a broken
  // icon and a console error, so it is shown as a link to open it instead.
  for (const img of frag.querySelectorAll("img")) {
    const src = img.getAttribute("src") || "";
    if (src.startsWith("data:") || sameOrigin(src)) continue;
    const label = `image: ${img.getAttribute("alt") || src}`;
    img.replaceWith(/^https?:/i.test(src)
      ? el("a", { href: src, class: "image-link", target: "_blank", rel: "noopener noreferrer", text: label })
      : el("span", { class: "image-link", text: label }));
  }
  for (const a of frag.querySelectorAll("a:not([href])")) a.title = "link removed: only http(s) addresses are kept";
  return frag;
}

function sameOrigin(url) {
  try {
    return new URL(url, location.href).origin === location.origin;
  } catch {
    return false;
  }
}

// Which limit stopped a run, from its view (GET /v1/runs/{id}): the field of a resume that raises
// it, a value to suggest and what to say. A budget_exceeded whose reason starts with the token
// limit's words (tether.status.TOKEN_LIMIT) was stopped by max_run_tokens, not by the dollar budget.
// max_budget_usd and max_run_tokens are new totals above what the run used; more_turns, turns beyond.
function limitReached(run) {
  if (run.status === "max_turns_exceeded") {
    const turns = run.turns || 0;
    return { field: "more_turns", label: "More turns", value: Math.max(turns, 5), min: 1, step: "1",
      why: `Stopped at its turn limit after ${turns} turn${turns === 1 ? "" : "s"}.` };
  }
  if (run.status !== "budget_exceeded") return null;
  if ((run.reason || "").startsWith("the run's token limit")) {
    const used = (run.prompt_tokens || 0) + (run.completion_tokens || 0);
    return { field: "max_run_tokens", label: "New token limit, in all", value: Math.ceil((2 * used + 1) / 1000) * 1000,
      min: used + 1, step: "1", why: `Stopped at its token limit: ${used.toLocaleString("en")} tokens used.` };
  }
  const spent = (run.cost_usd || 0) + (run.cost_unknown_usd || 0); // what the server counts as spent
  const cents = Math.ceil(Math.max(2 * spent, spent + 0.01) * 100) / 100;
  return { field: "max_budget_usd", label: "New budget in all, $", value: cents, min: 0, step: "any",
    why: `Stopped at its budget: $${spent.toFixed(6)} spent.` };
}

// ---- the API ------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function authHeaders(extra = {}) {
  return state.token ? { ...extra, Authorization: `Bearer ${state.token}` } : extra;
}

async function failure(res) {
  let message = `${res.status} ${res.statusText}`;
  try {
    message = (await res.json()).error?.message || message;
  } catch {
    // not JSON: keep the status line
  }
  if (res.status === 401) showLogin(message);
  return new ApiError(res.status, message);
}

async function api(path, { method = "GET", body, signal } = {}) {
  const headers = authHeaders(body === undefined ? {} : { "Content-Type": "application/json" });
  const res = await fetch(at(path), {
    method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw await failure(res);
  return res.status === 204 ? null : res.json();
}

// Reads a run's events from `after` (the last id seen) and hands each to `onEvent`; returns true
// when `onEvent` says the run is done, false when the stream ended without that (a dropped
// connection). EventSource cannot send Authorization or choose Last-Event-ID, hence fetch.
async function readEvents(runId, after, onEvent, signal) {
  const headers = authHeaders({ Accept: "text/event-stream" });
  if (after != null) headers["Last-Event-ID"] = String(after);
  const res = await fetch(at(`/v1/runs/${encodeURIComponent(runId)}/events`), { headers, signal, cache: "no-store" });
  if (!res.ok) throw await failure(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  let id = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buffer += value;
    // A "\r" at the end of a chunk may be the first half of "\r\n": keep it for the next chunk.
    const lines = buffer.split(/\r\n|\n|\r(?!$)/);
    buffer = lines.pop();
    for (const line of lines) {
      if (line === "") {
        if (data.length && onEvent(JSON.parse(data.join("\n")), id)) {
          reader.cancel().catch(() => {});
          return true;
        }
        data = [];
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") data.push(value);
        else if (field === "id") id = value;
      }
    }
  }
}

// ---- one turn: the user's message and everything its run produced -------------------------------

class Turn {
  constructor(view, { text, messageId, runId = null }) {
    this.view = view;
    this.messageId = messageId;
    this.runId = runId;
    this.lastId = null;
    this.steps = new Map(); // stepKey -> step
    this.replies = new Map(); // run_id -> how many replies (turn events) of it were read
    this.segment = null; // the answer text being streamed
    this.waiting = null; // what the run stopped for: {call_id, tool_name, args, args_hash, type}
    this.stopped = false; // the last done was a stop for a decision, not the end
    this.widgets = [];
    this.status = el("div", { class: "status muted", text: "Thinking…" });
    this.body = el("div", { class: "assistant" }, this.status); // steps and answer go before status
    this.foot = el("div", { class: "turn-foot" }); // the exit line and the feedback
    this.node = el("article", { class: "turn" }, el("div", { class: "user-msg", text }), this.body, this.foot);
  }

  // Steps and answers go before the status line; once the run ended the status line is gone, and
  // what still arrives (a note about a refused follow-up, say) goes at the end.
  place(node) {
    if (this.status.parentNode === this.body) this.body.insertBefore(node, this.status);
    else this.body.append(node);
  }

  note(text, cls = "note") {
    this.place(el("div", { class: cls, text }));
  }

  // -- events --
  handle(ev, id) {
    if (id != null) this.lastId = Number(id);
    if (this.stoppedBy && ev.type !== "done") { // the run went on after a Stop: say so where it stopped
      this.note(`${this.stoppedBy[0].toUpperCase()}${this.stoppedBy.slice(1)}, then resumed.`);
      this.stoppedBy = null;
    }
    const bottom = nearBottom();
    const handler = this["on_" + ev.type];
    if (handler) handler.call(this, ev);
    else if (!["started", "reasoning_delta", "spent_unknown"].includes(ev.type)) this.note(ev.type);
    keepScrolled(bottom);
    return ev.type === "done" && !this.stopped; // after a decision the same run goes on
  }

  on_text_delta(ev) {
    if (!this.segment) {
      this.segment = { text: "", node: el("div", { class: "answer" }), queued: false };
      this.place(this.segment.node);
    }
    const seg = this.segment;
    seg.text += ev.text;
    if (!seg.queued) { // one render per frame, however many deltas arrive
      seg.queued = true;
      requestAnimationFrame(() => {
        seg.queued = false;
        const bottom = nearBottom();
        seg.node.replaceChildren(renderMarkdown(seg.text));
        keepScrolled(bottom);
      });
    }
  }

  // A call is its id in one reply of one run: a model may number each reply's calls anew ("call_1"
  // again), and a sub-agent's model numbers its own.
  isChilds(ev) {
    return Boolean(ev.run_id && this.runId && ev.run_id !== this.runId);
  }

  stepKey(ev) {
    const run = this.isChilds(ev) ? ev.run_id : this.runId;
    return `${this.isChilds(ev) ? run : ""}/${this.replies.get(run) || 0}/${ev.call_id}`;
  }

  on_turn(ev) {
    const run = ev.run_id || this.runId;
    this.replies.set(run, (this.replies.get(run) || 0) + 1);
  }

  step(ev) {
    const key = this.stepKey(ev);
    let step = this.steps.get(key);
    if (!step) {
      step = { node: el("div", { class: "step" }) };
      step.name = el("span", { class: "tool-name", text: ev.tool_name });
      step.args = el("code", { class: "tool-args" });
      step.badge = el("span", { class: "badge" });
      step.label = el("span", { class: "progress muted" });
      step.node.append(el("div", { class: "step-line" }, step.name, step.args, step.badge, step.label));
      this.steps.set(key, step);
      this.segment = null; // text after a tool call is a new paragraph of the answer
      this.place(step.node);
    }
    const raw = ev.arguments ?? ev.args; // a run's waiting has the arguments as written, too
    if (raw != null && !step.args.textContent) {
      const args = compactArgs(raw);
      step.args.textContent = truncate(args, ARGS_SHOWN);
      step.args.title = args;
    }
    return step;
  }

  setBadge(step, status) {
    step.badge.textContent = status;
    step.badge.className = `badge badge-${status.replace(/[^a-z_]/g, "")}`;
  }

  on_tool_start(ev) {
    this.setBadge(this.step(ev), "running");
    this.status.textContent = `Running ${ev.tool_name}…`;
  }

  on_tool_progress(ev) {
    this.step(ev).label.textContent = ev.label;
  }

  on_tool_result(ev) {
    const step = this.step(ev);
    this.setBadge(step, ev.status || (ev.ok ? "ok" : "error"));
    step.label.textContent = ev.ms != null ? `${Math.round(ev.ms)} ms` : "";
    this.status.textContent = "Thinking…";
    if (ev.widget) this.addWidget(step, ev.widget);
  }

  on_approval_required(ev) {
    if (this.isChilds(ev)) { // a sub-agent's call: decided as the parent's run waits (its waiting)
      this.setBadge(this.step(ev), "needs approval");
      return;
    }
    this.ask({ ...ev, type: ev.reason });
  }

  // A card asking the person to decide: from an approval_required event, or from the run's
  // `waiting` (what a reloaded page, or a guardrail's question, has instead of the event).
  // A sub-agent's question is its child's (a call, a form): the card shows that one, and the decision
  // quotes the parent's call and the hash that binds it to the question shown.
  ask(waiting) {
    if (this.waiting?.call_id === waiting.call_id && this.waiting?.args_hash === waiting.args_hash
      && this.card?.isConnected) return;
    const known = this.steps.has(this.stepKey(waiting)) || waiting.tool_name;
    const step = known ? this.step(waiting) : null;
    const via = [];
    let shown = waiting;
    while (shown.type === "subagent" && shown.asked) {
      via.push(shown.tool_name);
      shown = shown.asked;
    }
    if (via.length) shown = { ...shown, call_id: waiting.call_id, args_hash: waiting.args_hash, via };
    const badge = { outcome_unknown: "outcome unknown", elicitation: "asks you" }[shown.type] || "needs approval";
    if (step) this.setBadge(step, badge);
    this.card?.remove();
    this.card = shown.type === "elicitation" ? questionCard(this, shown) : approvalCard(this, shown);
    if (step) step.node.append(this.card);
    else this.place(this.card);
    this.waiting = waiting;
  }

  on_decision(ev) {
    this.decided(ev.call_id, ev.decision === "approved", ev.reason, ev);
  }

  // Marks the call decided: when the decision was posted, and again (idempotent) when its event comes.
  decided(callId, approved, reason, ev = null, words = approved ? "Allowed" : "Denied") {
    const key = this.stepKey(ev || { call_id: callId });
    const step = (ev || this.steps.has(key)) ? this.step(ev || { call_id: callId }) : null;
    if (step) this.setBadge(step, approved ? "approved" : "rejected");
    if (!(ev && this.isChilds(ev)) && this.waiting?.call_id === callId) { // a sub-agent's decision is on its own call
      this.card?.remove();
      this.waiting = null;
    }
    const text = reason ? `${words}: ${reason}` : words;
    const line = this.node.querySelector(`.decision[data-call="${CSS.escape(key)}"]`);
    if (line) {
      if (reason) line.textContent = text; // an event without words keeps the ones typed
    } else (step ? step.node : this.body).append(el("div", { class: "decision", "data-call": key, text }));
  }

  on_retry(ev) { this.note(`Retrying (attempt ${ev.attempt}): ${ev.reason}`); }
  on_fallback(ev) { this.note(`Switched from ${ev.from_model} to ${ev.to_model}: ${ev.reason}`); }
  on_guardrail(ev) { this.note(`Guardrail ${ev.name || ""} ${ev.decision}: ${ev.rationale}`); }
  on_compaction(ev) { this.note(`Context compacted: ${ev.tokens_before} → ${ev.tokens_after} tokens`); }
  on_memory_write(ev) { this.note(`Memory (${ev.store}) ${ev.action}: ${ev.text}`); }
  on_memory_rejected(ev) { this.note(`Memory write refused: ${ev.reason}`); }
  on_subagent(ev) { this.note(`Sub-agent ${ev.name}: ${ev.status}`); }

  on_done(ev) {
    const r = ev.result;
    this.segment = null;
    this.lastStatus = r.status;
    this.stopped = r.status === "interrupted" && r.interruption != null && r.interruption.type !== "cancelled";
    this.stoppedBy = r.interruption?.type === "cancelled" ? ((r.reason || "").replace(/^cancelled: /, "") || "stopped") : null;
    if (this.stopped) {
      this.status.textContent = "Waiting for your decision.";
      return;
    }
    this.status.remove();
    this.showExit(r.status, r.reason, r.turns, r.usage?.prompt_tokens, r.usage?.completion_tokens, r.cost_usd);
    this.addFeedback();
  }

  showExit(status, reason, turns, prompt, completion, cost) {
    const tokens = (prompt || 0) + (completion || 0);
    const parts = [`${turns} turn${turns === 1 ? "" : "s"}`, `${tokens.toLocaleString("en")} tokens`,
      cost == null ? "cost unknown" : `$${cost.toFixed(4)}`];
    this.foot.querySelector(".exit")?.remove();
    this.foot.prepend(el("div", { class: `exit exit-${status}` },
      el("span", { class: "exit-status", text: status }),
      reason ? el("span", { class: "exit-reason", text: reason }) : null,
      el("span", { class: "exit-usage", text: parts.join(" · ") })));
  }

  // A run the server stopped (a restart, a cancel) can go on where it was; one a limit stopped goes
  // on only with that limit raised (a 409 otherwise): the form says which and offers a new one.
  offerResume(run = {}) {
    const limit = limitReached(run);
    const input = limit && el("input", { type: "number", name: limit.field, required: true, value: String(limit.value),
      min: String(limit.min), step: limit.step, "aria-label": limit.label });
    const button = el("button", { type: "submit", class: "resume", text: "Resume" });
    const form = el("form", { class: "resume-form" }, limit && el("span", { class: "resume-why", text: limit.why }),
      limit && el("label", {}, `${limit.label} `, input), button);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      button.disabled = true;
      const body = limit ? { [limit.field]: Number(input.value) } : {};
      try {
        await api(`/v1/runs/${encodeURIComponent(this.runId)}/resume`, { method: "POST", body });
        form.remove();
        this.foot.querySelector(".exit")?.remove();
        this.body.append(this.status);
        this.status.textContent = "Thinking…";
        follow(this);
      } catch (err) {
        button.disabled = false;
        this.note(`Could not resume: ${err.message}`, "error");
        if (!(err instanceof ApiError && err.status === 409)) return;
        // Resumed first in another tab: show how it went on. A limit not raised enough leaves the form.
        const now = await api(`/v1/runs/${encodeURIComponent(this.runId)}`).catch(() => null);
        if (now && (now.live || now.status !== run.status || !now.resumable)) {
          form.remove();
          follow(this);
        }
      }
    });
    this.foot.querySelector(".exit")?.append(form);
  }

  // -- feedback on the answer --
  addFeedback() {
    if (this.foot.querySelector(".feedback") || !this.messageId) return;
    const comment = el("input", { type: "text", placeholder: "Comment (optional)", "aria-label": "Comment" });
    const saved = el("span", { class: "feedback-saved muted", role: "status" });
    const box = el("div", { class: "feedback" });
    let score = null;
    const choose = (value) => {
      score = value;
      box.querySelectorAll(".thumb").forEach((b) => b.classList.toggle("chosen", b.dataset.score === value));
      more.hidden = false;
    };
    const send = async () => {
      try {
        await api(`/v1/messages/${encodeURIComponent(this.messageId)}/feedback`,
          { method: "POST", body: { score, comment: comment.value.trim() || undefined } });
        saved.textContent = comment.value.trim() ? "Feedback and comment recorded" : "Feedback recorded";
      } catch (err) {
        saved.textContent = `Not recorded: ${err.message}`;
      }
    };
    const thumb = (value, label) => el("button", {
      type: "button", class: "thumb", "aria-label": label, title: label, "data-score": value,
      onclick: () => { choose(value); send(); },
    }, thumbIcon(value === "down"));
    const more = el("form", { class: "feedback-comment", hidden: true, onsubmit: (e) => { e.preventDefault(); send(); } },
      comment, el("button", { type: "submit", text: "Save comment" }));
    box.append(thumb("up", "Good answer"), thumb("down", "Bad answer"), more, saved);
    this.foot.append(box);
    const known = this.view.feedback?.get(this.messageId); // recorded before this page was loaded
    if (known) {
      choose(known.score);
      comment.value = known.comment || "";
      saved.textContent = "Feedback recorded";
    }
  }

  // -- widgets a tool offered --
  addWidget(step, widget) {
    const node = widget.kind === "form" ? formWidget(widget)
      : widget.kind === "buttons" ? buttonsWidget(widget) : null;
    if (!node) return;
    this.widgets.push(node);
    step.node.after(node);
    if (this.view.turns.at(-1) !== this) disableWidget(node);
  }
}

// A thumb drawn as SVG: emoji fonts are missing on many servers' (and CI's) browsers.
function thumbIcon(down) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", "M2 10h4v11H2zM8 21h9.2a2 2 0 0 0 2-1.6l1.4-7A2 2 0 0 0 18.6 10H14l.9-4.4a1.8 1.8 0 0 0-3.2-1.4L8 10z");
  if (down) path.setAttribute("transform", "rotate(180 12 12)");
  svg.append(path);
  return svg;
}

function approvalCard(turn, ev) {
  const raw = ev.arguments ?? ev.args; // a run's waiting has the arguments as written, too
  const args = raw == null ? "" : compactArgs(raw);
  const reason = el("input", { type: "text", placeholder: "Reason (optional; the model reads it)", "aria-label": "Reason" });
  const error = el("p", { class: "error", role: "alert" });
  const decide = async (approve) => {
    card.querySelectorAll("button, input").forEach((b) => { b.disabled = true; });
    try {
      await api(`/v1/runs/${encodeURIComponent(turn.runId)}/decision`, {
        method: "POST",
        body: { call_id: ev.call_id, args_hash: ev.args_hash, approve, reason: reason.value.trim() || undefined },
      });
      turn.decided(ev.call_id, approve, reason.value.trim());
      turn.status.textContent = "Thinking…";
      follow(turn);
    } catch (err) {
      error.textContent = err.message;
      card.querySelectorAll("button, input").forEach((b) => { b.disabled = false; });
      refused(turn, err);
    }
  };
  const why = ev.type === "outcome_unknown" ? "Its outcome is unknown: it started before the run stopped. Run it again?"
    : ev.type === "guardrail" ? `A guardrail asks you (${ev.stage}): ${ev.rationale}`
    : ev.type === "sampling" ? `During this call the MCP server ${ev.server} asks the model: “${ev.preview}”` : null;
  // Every character of what is allowed is shown: a model could put the part that matters after
  // thousands of spaces. Long arguments go in a box of their own that scrolls, and say how long they are.
  const long = args.length > APPROVAL_ARGS_INLINE;
  const repeated = repeatedKeys(args);
  const card = el("div", { class: "approval", role: "group", "aria-label": "Approval" },
    el("p", { class: "approval-q" }, "Allow ", el("strong", { text: ev.tool_name || `this ${ev.stage || ev.type}` }),
      args && !long ? " " : null, args && !long ? el("code", { text: args }) : null, long ? " with these arguments" : null, "?"),
    long ? el("pre", { class: "approval-args", tabindex: "0", text: args }) : null,
    long ? el("p", { class: "muted", text: `The arguments are ${args.length.toLocaleString("en")} characters long: `
      + "read them to the end (the box scrolls) before you allow the call." }) : null,
    repeated.length ? el("p", { class: "error", text: `The arguments name ${repeated.join(", ")} more than once: `
      + "the tool gets only the last value of each." }) : null,
    why ? el("p", { class: "muted", text: why }) : null,
    ...heldAnswer(ev),
    ev.via ? el("p", { class: "muted", text: `The sub-agent ${ev.via.join(" → ")} asks for this call.` }) : null,
    reason,
    el("div", { class: "approval-buttons" },
      el("button", { type: "button", class: "allow", text: "Allow", onclick: () => decide(true) }),
      el("button", { type: "button", class: "deny", text: "Deny", onclick: () => decide(false) })),
    error);
  return card;
}

// The answer an output guardrail holds for the person to approve, as the text it is (never parsed
// as Markdown or HTML), in a box that scrolls; a cut one says how long it is whole.
function heldAnswer(ev) {
  if (ev.type !== "guardrail" || typeof ev.held !== "string") return [];
  const whole = Number(ev.held_chars) || ev.held.length;
  return [
    el("p", { class: "muted", text: "The answer you would let through:" }),
    el("pre", { class: "held-answer approval-args", tabindex: "0", text: ev.held.replace(HIDDEN_CHARS, escapeChar) }),
    whole > ev.held.length ? el("p", { class: "muted", text: `Its first ${ev.held.length.toLocaleString("en")} of `
      + `${whole.toLocaleString("en")} characters are shown; allowing delivers all of it.` }) : null,
  ];
}

// A decision the server refused: made first in another tab (409: read on, the run's events show what
// was decided and what followed), or its conversation deleted meanwhile (404: nothing more can run).
function refused(turn, err) {
  if (!(err instanceof ApiError)) return;
  if (err.status === 409) {
    follow(turn);
  } else if (err.status === 404) {
    turn.card?.remove();
    turn.waiting = null;
    turn.status.remove();
    turn.note(`Not decided: ${err.message}. Its conversation was deleted (in another tab?), so it cannot go on.`, "error");
  }
}

// A form a tool offered (its values become the next message), or an MCP server's question
// (`onSubmit` sends them as the answer instead).
// An MCP server asks the person during a tool call (elicitation): its form, or a page to open.
// Sending answers the server (the call is made again with the answer); Decline says no.
function questionCard(turn, ev) {
  const error = el("p", { class: "error", role: "alert" });
  const card = el("div", { class: "approval question", role: "group", "aria-label": `${ev.server} asks you` },
    el("p", { class: "approval-q" }, el("strong", { text: ev.server }), " asks you: ", el("span", { text: ev.message })),
    ev.via ? el("p", { class: "muted", text: `During a call of the sub-agent ${ev.via.join(" → ")}.` }) : null);
  const answer = async (approve, content, form = null) => {
    card.querySelectorAll("button, input, select").forEach((b) => { b.disabled = true; });
    try {
      await api(`/v1/runs/${encodeURIComponent(turn.runId)}/decision`, {
        method: "POST", body: { call_id: ev.call_id, args_hash: ev.args_hash, approve, content },
      });
      turn.decided(ev.call_id, approve, "", null, approve ? "Answered" : "Declined");
      turn.status.textContent = "Thinking…";
      follow(turn);
    } catch (err) {
      error.textContent = err.message;
      card.querySelectorAll("button, input, select").forEach((b) => { b.disabled = false; });
      if (form) form.classList.remove("used");
      refused(turn, err);
    }
  };
  if (ev.form) {
    card.append(formWidget({ ...ev.form, title: "" }, (values, form) => answer(true, values, form)));
  } else if (ev.url) {
    // The server chose the address: only an http(s) one is a link (a javascript: or data: one is text).
    const page = /^https?:\/\//i.test(ev.url)
      ? el("a", { href: ev.url, target: "_blank", rel: "noopener noreferrer", text: ev.url })
      : el("span", { title: "not a link: only http(s) addresses are opened", text: ev.url });
    card.append(el("p", {}, page),
      el("button", { type: "button", class: "allow", text: "Done", onclick: () => answer(true) }));
  }
  card.append(el("div", { class: "approval-buttons" },
    el("button", { type: "button", class: "deny", text: "Decline", onclick: () => answer(false) })), error);
  return card;
}

function formWidget(widget, onSubmit = null) {
  const inputs = [];
  const form = el("form", { class: "widget widget-form" });
  if (widget.title) form.append(el("h3", { text: widget.title }));
  for (const field of widget.fields || []) {
    const name = String(field.name);
    let input;
    if (field.type === "select") {
      input = el("select", { name, multiple: Boolean(field.multiple) });
      const chosen = Array.isArray(field.value) ? field.value.map(String) : [String(field.value)];
      for (const option of field.options || []) {
        const text = String(field.option_labels?.[option] ?? option);
        input.append(el("option", { value: String(option), text, selected: chosen.includes(String(option)) }));
      }
    } else if (field.type === "checkbox") {
      input = el("input", { type: "checkbox", name, checked: Boolean(field.value) });
    } else if (field.type === "number") {
      input = el("input", { type: "number", name, min: field.min, max: field.max, step: field.step ?? "any", value: field.value ?? "" });
    } else {
      input = el("input", { type: field.input || "text", name, value: field.value ?? "" });
    }
    if (field.required && field.type !== "checkbox") input.required = true;
    inputs.push({ field, input });
    const label = String(field.label ?? name);
    form.append(field.type === "checkbox"
      ? el("label", { class: "check" }, input, el("span", { text: label }))
      : el("label", {}, el("span", { text: label }), input));
  }
  form.append(el("button", { type: "submit", text: String(widget.submit || "Submit") }));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (!form.reportValidity()) return;
    const values = {};
    const said = [];
    for (const { field, input } of inputs) {
      let value = input.value;
      let shown = value;
      if (field.type === "checkbox") {
        value = input.checked;
        shown = value ? "yes" : "no";
      } else if (field.multiple) {
        value = [...input.selectedOptions].map((o) => o.value);
        shown = [...input.selectedOptions].map((o) => o.textContent).join(", ");
      } else if (field.type === "number") {
        value = value === "" ? null : Number(value);
      }
      if (value !== null) values[field.name] = value; // the server keeps strings, numbers, booleans
      said.push(`${field.label ?? field.name}: ${shown}`);
    }
    disableWidget(form);
    if (onSubmit) onSubmit(values, form);
    else sendMessage(said.join("; "), values);
  });
  return form;
}

function buttonsWidget(widget) {
  const box = el("div", { class: "widget widget-buttons" });
  if (widget.title) box.append(el("h3", { text: widget.title }));
  const row = el("div", { class: "cta-row" });
  for (const button of widget.buttons || []) {
    const label = String(button.label);
    row.append(el("button", { type: "button", class: "cta", text: label,
      onclick: () => { disableWidget(box); sendMessage(label); } }));
  }
  box.append(row);
  return box;
}

function disableWidget(node) {
  node.classList.add("used");
  node.querySelectorAll("button, input, select").forEach((c) => { c.disabled = true; });
}

// Reads the turn's run until it is done or waits for a decision, resuming from the last id seen
// after a dropped connection.
async function follow(turn) {
  const view = turn.view;
  const { signal } = view.abort;
  let delay = 250;
  busy(view, +1);
  try {
    while (!signal.aborted) {
      const before = turn.lastId;
      try {
        if (await readEvents(turn.runId, turn.lastId, (ev, id) => turn.handle(ev, id), signal)) {
          // A done that a resume went on from (after Stop or a restart) is not the run's last:
          // read on while the run is live or has ended differently; offer Resume if it can go on.
          // A run a killed server cut still says "running" (as saved), live nowhere: its done,
          // which the server added as it started again, is its last until it is resumed.
          const run = await api(`/v1/runs/${encodeURIComponent(turn.runId)}`, { signal }).catch(() => null);
          const cut = run && !run.live && run.status === "running";
          if (run && !cut && (run.live || run.status !== turn.lastStatus)) continue;
          if (run?.resumable) turn.offerResume(run);
          return;
        }
      } catch (err) {
        if (signal.aborted) return;
        console.warn(`run ${turn.runId}: the stream broke off (${err.message}); reading on from ${turn.lastId}`);
        if (err instanceof ApiError && err.status < 500) {
          turn.note(`Could not read this run: ${err.message}`, "error");
          return;
        }
      }
      // The stream ended before a final done: the run waits for a decision, or the connection dropped.
      const run = await api(`/v1/runs/${encodeURIComponent(turn.runId)}`, { signal }).catch(() => null);
      if (run?.waiting) {
        turn.ask(run.waiting);
        turn.status.textContent = "Waiting for your decision.";
        return;
      }
      if (run && !run.live && turn.lastId === before) { // nothing more will come: say how it ended
        turn.status.remove();
        turn.showExit(run.status, run.reason, run.turns, run.prompt_tokens, run.completion_tokens, run.cost_usd);
        if (run.resumable) turn.offerResume(run);
        return;
      }
      if (turn.lastId === before) {
        await sleep(delay);
        delay = Math.min(delay * 2, 4000);
      } else {
        delay = 250;
      }
    }
  } finally {
    busy(view, -1);
  }
}

// The composer waits while a message is being sent or a run of the shown conversation streams.
function busy(view, change) {
  view.streams += change;
  if (view === state.view) {
    $("send").disabled = view.streams > 0;
    $("stop").hidden = view.streams === 0;
  }
  if (view.streams === 0) view.idle.splice(0).forEach((resolve) => resolve());
}

// Resolves once nothing of the view streams (or the view is left): a button or a form of a run
// still answering is clicked before its run ends, and the server takes one run per session.
function idle(view) {
  if (view.streams === 0 || view.abort.signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    view.idle.push(resolve);
    view.abort.signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

// Stop: cancels the shown conversation's live run; it ends interrupted (resumable) and says so.
async function stopRun() {
  const turn = [...state.view.turns].reverse().find((t) => t.runId);
  if (!turn) return;
  $("stop").disabled = true;
  try {
    await api(`/v1/runs/${encodeURIComponent(turn.runId)}/cancel`, { method: "POST" });
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 409)) turn.note(`Could not stop: ${err.message}`, "error");
  } finally {
    $("stop").disabled = false;
  }
}

// ---- the conversation ---------------------------------------------------------------------------

function newView() {
  state.view?.abort.abort();
  state.view = { abort: new AbortController(), turns: [], feedback: null, streams: 0, idle: [] };
  busy(state.view, 0);
  $("chat").replaceChildren(el("p", { id: "empty", class: "empty muted", text: "Ask something to start a conversation." }));
  return state.view;
}

function addTurn(view, spec) {
  return placeTurn(view, new Turn(view, spec));
}

// A turn goes last: the widgets of the turns before it are spent.
function placeTurn(view, turn) {
  for (const earlier of view.turns) earlier.widgets.forEach(disableWidget);
  view.turns.push(turn);
  $("empty")?.remove();
  $("chat").append(turn.node);
  return turn;
}

async function openSession(sessionId) {
  const view = newView();
  state.sessionId = sessionId;
  markActive();
  $("session-actions").hidden = !sessionId;
  if (!sessionId) {
    $("title").textContent = "New chat";
    $("agent-name").textContent = "";
    return;
  }
  let session;
  try {
    session = await api(`/v1/sessions/${encodeURIComponent(sessionId)}`, { signal: view.abort.signal });
  } catch (err) {
    if (err.name !== "AbortError") $("chat").append(el("p", { class: "error", text: err.message }));
    return;
  }
  $("title").textContent = session.title || "New chat";
  $("agent-name").textContent = session.agent;
  if (state.agents.some((a) => a.name === session.agent)) $("agent-pick").value = session.agent;
  view.feedback = await loadFeedback(view);
  // A message sent from here while the session loaded (a quick typist, a slow server) is a turn
  // already: the history goes before it, and the history's own record of it is not a second turn.
  const sent = view.turns.splice(0);
  const mine = new Set(sent.map((turn) => turn.messageId));
  for (const t of session.turns || []) {
    if (mine.has(t.message_id)) continue;
    const turn = addTurn(view, { text: t.text, messageId: t.message_id, runId: t.run_id });
    follow(turn); // replays the run from the start; a live run keeps streaming after it catches up
  }
  for (const turn of sent) placeTurn(view, turn);
  $("chat").scrollTop = $("chat").scrollHeight;
}

async function loadFeedback(view) {
  try {
    const { feedback } = await api("/v1/feedback", { signal: view.abort.signal });
    return new Map(feedback.map((f) => [f.message_id, f]));
  } catch {
    return new Map();
  }
}

// A message sent while a new chat is being made (typed at once after New chat) waits until it is
// open and goes there, not to the conversation still shown, nor to a second new chat of its own.
async function newSession() {
  const body = state.agents.length > 1 ? { agent: $("agent-pick").value } : {};
  const asked = api("/v1/sessions", { method: "POST", body });
  state.making = asked;
  let session;
  try {
    session = await asked;
  } finally {
    if (state.making === asked) state.making = null;
  }
  const opened = openSession(session.session_id); // sets state.sessionId before hashchange looks
  location.hash = encodeURIComponent(session.session_id);
  await Promise.all([opened, loadSessions()]);
  return session;
}

async function sendMessage(text, values) {
  text = text.trim();
  if (!text) return;
  if (state.making) await state.making.catch(() => null); // opened by then (its failure is said by New chat)
  if (!state.sessionId && !(await newSession().catch((err) => { showError(`Not sent: ${err.message}`); return null; }))) return;
  const view = state.view;
  const messageId = newId("m_");
  const turn = addTurn(view, { text, messageId });
  keepScrolled(true);
  const body = { text, message_id: messageId };
  if (values) body.values = values;
  const path = `/v1/sessions/${encodeURIComponent(state.sessionId)}/messages`;
  if (view.streams > 0) { // a widget's click while its run still answers: sent when that run ends
    turn.status.textContent = "Sends when the answer above ends…";
    await idle(view);
    if (view.abort.signal.aborted) return;
    turn.status.textContent = "Thinking…";
  }
  busy(view, +1);
  try {
    for (let attempt = 1, waits = 0; ; attempt++) { // a retry sends the same message_id: never a second run
      try {
        turn.runId = (await api(path, { method: "POST", body, signal: view.abort.signal })).run_id;
        break;
      } catch (err) {
        if (err.name === "AbortError") return;
        if (err instanceof ApiError && err.status === 409 && /still answering/.test(err.message) && ++waits < 40) {
          attempt--; // another tab's run, or this one's last saves: the same message once it ends (10 s)
          await sleep(250);
          continue;
        }
        if (err instanceof ApiError || attempt === 3) {
          turn.status.remove();
          turn.note(`Not sent: ${err.message}`, "error");
          return;
        }
        await sleep(500 * attempt);
      }
    }
  } finally {
    busy(view, -1);
  }
  follow(turn);
  if (view.turns.length === 1) loadSessions(); // the server may have titled the session
}

// ---- sidebar, auth, start ----------------------------------------------------------------------

function when(seconds) {
  const d = new Date(seconds * 1000);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : d.toLocaleDateString();
}

async function loadSessions() {
  const { sessions } = await api("/v1/sessions");
  sessions.sort((a, b) => (b.updated ?? b.created) - (a.updated ?? a.created));
  $("sessions").replaceChildren(...sessions.map((s) => el("li", {},
    el("a", { href: `#${encodeURIComponent(s.session_id)}`, "data-id": s.session_id },
      el("span", { class: "session-title", text: s.title || "New chat" }),
      el("span", { class: "session-meta muted", text: `${s.agent} · ${when(s.updated ?? s.created)}` })))));
  const shown = sessions.find((s) => s.session_id === state.sessionId);
  if (shown) $("title").textContent = shown.title || "New chat";
  markActive();
}

function markActive() {
  for (const a of $("sessions").querySelectorAll("a")) {
    a.classList.toggle("active", a.dataset.id === state.sessionId);
  }
}

async function loadAgents() {
  const { agents } = await api("/v1/agents");
  state.agents = agents;
  const pick = $("agent-pick");
  pick.replaceChildren(...agents.map((a) => el("option", { value: a.name, text: a.name, title: a.description || a.model })));
  pick.hidden = agents.length < 2;
}

function showLogin(message) {
  $("login").hidden = false;
  $("chat").hidden = $("composer").hidden = true;
  $("new-chat").disabled = $("agent-pick").disabled = true; // nothing to start before signing in
  $("session-actions").hidden = true;
  $("login-error").textContent = state.token ? message : "";
}

// A failure outside any turn (starting a chat, renaming one): said in the conversation, not in a dialog.
function showError(message) {
  $("chat").append(el("p", { class: "error", role: "alert", text: message }));
}

async function start() {
  const shown = state.view; // what was shown before: a person who opens a chat meanwhile is not overruled
  let me;
  try {
    me = await api("/v1/me");
  } catch (err) {
    if (err.status === 401) return;
    const said = `The server did not answer: ${err.message}`;
    if (!$("login").hidden) $("login-error").textContent = said; // signing in: the chat is hidden
    else $("chat").append(el("p", { class: "error", text: said }));
    return;
  }
  $("login").hidden = true;
  $("chat").hidden = $("composer").hidden = false;
  $("new-chat").disabled = $("agent-pick").disabled = false;
  $("me").replaceChildren(el("span", { text: me.user }));
  if (me.auth) {
    $("me").append(el("button", { type: "button", class: "link", text: "Sign out", onclick: () => {
      sessionStorage.removeItem(TOKEN_KEY);
      state.token = "";
      location.hash = "";
      location.reload();
    } }));
  }
  await Promise.all([loadAgents(), loadSessions(), loadAccounts()]);
  // New chat clicked (or a conversation's link followed) while the lists came: that chat stays, and
  // a message being sent there is not cut off by opening the address's session over it.
  if (state.view === shown) await openSession(hashSession());
}

// The session named in the address after "#" (a link may carry one that is not valid percent-encoding:
// it is asked for as written, and the server says there is no such session).
function hashSession() {
  const raw = location.hash.slice(1);
  try {
    return decodeURIComponent(raw) || null;
  } catch {
    return raw;
  }
}

// ---- the user's own accounts for MCP servers that sign people in (OAuth per user) ----------------
//
// Connect opens the server's authorization page in a new tab; when it sends the browser back to
// tether, the flow ends there and this list, polled meanwhile, says so. The tab is opened at the
// click (a later window.open is blocked as a popup) and cut from this page (opener = null) before
// it leaves for the other site.

const ACCOUNT_POLL_MS = 1500;
const ACCOUNT_WAIT_MS = 300_000; // the server forgets an unfinished flow after 5 minutes

async function loadAccounts() {
  let connections = [];
  try {
    ({ connections } = await api("/v1/connections"));
  } catch {
    connections = [];
  }
  $("accounts").hidden = connections.length === 0;
  $("account-list").replaceChildren(...connections.map(accountItem));
  return connections;
}

function accountItem({ server, connected }) {
  const item = el("li", { class: "account", "data-server": server },
    el("span", { class: "account-name", text: server }),
    el("span", { class: "account-state muted", text: connected ? "connected" : "not connected" }));
  const button = connected
    ? el("button", { type: "button", class: "link", text: "Disconnect", onclick: () => disconnect(server, item) })
    : el("button", { type: "button", class: "link", text: "Connect", onclick: () => connect(server, item) });
  item.append(button);
  return item;
}

function accountFailed(item, message) {
  item.querySelector(".error")?.remove();
  item.append(el("p", { class: "error", role: "alert", text: message }));
}

async function connect(server, item) {
  const tab = window.open("about:blank", "_blank");
  if (tab) tab.opener = null;
  item.querySelector("button").disabled = true;
  item.querySelector(".account-state").textContent = "waiting for the sign-in…";
  let url;
  try {
    ({ authorize_url: url } = await api(`/v1/connections/${encodeURIComponent(server)}`, { method: "POST" }));
  } catch (err) {
    tab?.close();
    await loadAccounts();
    accountFailed($("account-list").querySelector(`[data-server="${CSS.escape(server)}"]`) || item, `Not connected: ${err.message}`);
    return;
  }
  if (!url) {
    // connected already: the account's tokens still work, so there is no page to open
    tab?.close();
    await loadAccounts();
    return;
  }
  if (tab) tab.location.href = url;
  else item.append(el("a", { href: url, target: "_blank", rel: "noopener noreferrer", text: "Open the sign-in page" }));
  const until = Date.now() + ACCOUNT_WAIT_MS;
  while (Date.now() < until) {
    await sleep(ACCOUNT_POLL_MS);
    const connections = await loadAccounts();
    if (connections.some((c) => c.server === server && c.connected)) return;
    if (tab?.closed) break; // given up in the tab, or denied there
  }
  const shown = $("account-list").querySelector(`[data-server="${CSS.escape(server)}"]`);
  if (shown) accountFailed(shown, "Not connected: the sign-in did not finish. Connect again to retry.");
}

async function disconnect(server, item) {
  try {
    await api(`/v1/connections/${encodeURIComponent(server)}`, { method: "DELETE" });
  } catch (err) {
    accountFailed(item, `Not disconnected: ${err.message}`);
    return;
  }
  await loadAccounts();
}

$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const token = $("token").value.trim();
  if (!TOKEN_CHARS.test(token)) { // the browser could not even send it: say so, keep nothing
    $("login-error").textContent = "That is not a token: a token is letters, digits and signs, without spaces "
      + "or characters such as “…” (copy it again from tether serve token create).";
    return;
  }
  state.token = token;
  sessionStorage.setItem(TOKEN_KEY, state.token);
  start();
});

// ---- an MCP server's prompts as /commands: offered while the message's first word is typed ----

const prompts = {}; // agent -> a promise of its prompts

function promptsOf(agent) {
  if (!(agent in prompts)) {
    prompts[agent] = api(`/v1/agents/${encodeURIComponent(agent)}/prompts`).then((r) => r.prompts, () => []);
  }
  return prompts[agent];
}

async function offerPrompts() {
  const hints = $("prompt-hints");
  const text = $("prompt").value;
  const agent = $("agent-name").textContent || $("agent-pick").value;
  if (!agent || !/^\/[^\s/]*$/.test(text)) {
    hints.hidden = true;
    return;
  }
  const typed = text.slice(1);
  const found = (await promptsOf(agent)).filter((p) => p.name.startsWith(typed) || `${p.server}:${p.name}`.startsWith(typed));
  if ($("prompt").value !== text) return; // typed on meanwhile
  hints.replaceChildren(...found.map((p) => {
    const args = p.arguments.map((a) => (a.required ? `${a.name}=…` : `[${a.name}=…]`)).join(" ");
    const fill = `/${p.name} ${p.arguments.filter((a) => a.required).map((a) => `${a.name}=`).join(" ")}`;
    return el("button", { type: "button", class: "prompt-hint", title: `from ${p.server}`, onclick: () => {
      $("prompt").value = fill;
      hints.hidden = true;
      $("prompt").focus();
    } }, el("code", { text: `/${p.name} ${args}`.trim() }), el("span", { class: "about", text: p.description }));
  }));
  hints.hidden = found.length === 0;
}

// ---- an MCP server's resources as @SERVER:URI mentions: offered while an @word is typed ----------

const resources = {}; // agent -> a promise of its servers' resources and templates

function resourcesOf(agent) {
  if (!(agent in resources)) {
    resources[agent] = api(`/v1/agents/${encodeURIComponent(agent)}/resources`).then((r) => r.resources, () => []);
  }
  return resources[agent];
}

const MENTIONS_SHOWN = 20;

async function offerResources() {
  const hints = $("prompt-hints");
  const input = $("prompt");
  const text = input.value;
  const agent = $("agent-name").textContent || $("agent-pick").value;
  const typing = text.slice(0, input.selectionStart).match(/(?:^|\s)@([^\s@]*)$/);
  if (!agent || !typing) return false;
  const typed = typing[1].toLowerCase();
  const found = (await resourcesOf(agent)).filter((r) => `${r.server}:${r.uri}`.toLowerCase().startsWith(typed)
    || r.uri.toLowerCase().includes(typed) || (r.name || "").toLowerCase().includes(typed)).slice(0, MENTIONS_SHOWN);
  if (input.value !== text) return true; // typed on meanwhile
  hints.replaceChildren(...found.map((r) => {
    const mention = `@${r.server}:${r.uri}`;
    return el("button", { type: "button", class: "prompt-hint", title: r.template ? "a template: fill in its {…}" : `from ${r.server}`, onclick: () => {
      const start = input.selectionStart - typing[1].length - 1;
      input.value = text.slice(0, start) + mention + (r.template ? "" : " ") + text.slice(input.selectionStart);
      hints.hidden = true;
      input.focus();
    } }, el("code", { text: mention }), el("span", { class: "about", text: [r.name, r.description].filter(Boolean).join(": ") }));
  }));
  hints.hidden = found.length === 0;
  return true;
}

$("prompt").addEventListener("input", async () => {
  if (!(await offerResources())) offerPrompts();
});

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  if ($("send").disabled) return;
  const text = $("prompt").value;
  $("prompt").value = "";
  $("prompt-hints").hidden = true;
  sendMessage(text);
});

$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});

$("stop").addEventListener("click", () => stopRun());

$("new-chat").addEventListener("click", () => {
  closeSidebar();
  newSession().catch((err) => showError(`Could not start a chat: ${err.message}`));
});

// ---- the sidebar on a phone, and the shown session's copy, rename and delete ---------------------

function closeSidebar() {
  document.body.classList.remove("sidebar-open");
  $("menu").setAttribute("aria-expanded", "false");
}

$("menu").addEventListener("click", () => {
  const open = document.body.classList.toggle("sidebar-open");
  $("menu").setAttribute("aria-expanded", String(open));
});
$("scrim").addEventListener("click", closeSidebar);
$("sessions").addEventListener("click", (e) => { if (e.target.closest("a")) closeSidebar(); });

function conversationText() {
  return state.view.turns.map((t) => {
    const asked = t.node.querySelector(".user-msg")?.textContent || "";
    const answer = [...t.node.querySelectorAll(".answer")].map((a) => a.innerText.trim()).join("\n\n");
    return `You: ${asked}\n\n${$("agent-name").textContent || "Agent"}: ${answer}`;
  }).join("\n\n---\n\n");
}

$("copy-session").addEventListener("click", async () => {
  const button = $("copy-session");
  try {
    await navigator.clipboard.writeText(conversationText());
    button.textContent = "Copied";
  } catch (err) {
    button.textContent = "Not copied";
    showError(`Could not copy: ${err.message}`);
  }
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
});

$("rename-session").addEventListener("click", () => {
  const sessionId = state.sessionId;
  const title = $("title");
  const input = el("input", { type: "text", class: "title-edit", value: title.textContent, "aria-label": "New title", maxlength: "200" });
  title.hidden = true;
  title.after(input);
  input.focus();
  input.select();
  const finish = async (save) => {
    if (!input.isConnected) return;
    input.remove();
    title.hidden = false;
    const wanted = input.value.trim();
    if (!save || !wanted || wanted === title.textContent) return;
    try {
      const session = await api(`/v1/sessions/${encodeURIComponent(sessionId)}`, { method: "PATCH", body: { title: wanted } });
      if (state.sessionId === sessionId) title.textContent = session.title;
      await loadSessions();
    } catch (err) {
      showError(`Not renamed: ${err.message}`);
    }
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") { e.preventDefault(); finish(true); }
    if (e.key === "Escape") finish(false);
  });
  input.addEventListener("blur", () => finish(true));
});

// Delete asks by changing the button: a second click within a few seconds deletes.
$("delete-session").addEventListener("click", async () => {
  const button = $("delete-session");
  if (!button.dataset.armed) {
    button.dataset.armed = "1";
    button.textContent = "Delete? Click again";
    setTimeout(() => { delete button.dataset.armed; button.textContent = "Delete"; }, 4000);
    return;
  }
  delete button.dataset.armed;
  button.textContent = "Delete";
  try {
    await api(`/v1/sessions/${encodeURIComponent(state.sessionId)}`, { method: "DELETE" });
    location.hash = "";
    await Promise.all([openSession(null), loadSessions()]);
  } catch (err) {
    showError(`Not deleted: ${err.message}`);
  }
});

window.addEventListener("hashchange", () => {
  const id = hashSession();
  if (id !== state.sessionId) openSession(id);
});

start();
