// Unit tests of the page's pure modules, run in headless Chromium by
// web/browser_test.go (TestPureModules). Results land in #results as JSON.

import { jobCardData } from "../js/jobcard.js";
import { initial, reduce, mergeSync, addLocalPrompt, dropQueued, resultText } from "../js/transcript.js";
import { backoffDelay } from "../js/backoff.js";
import { tokenize, langOf } from "../js/syntax.js";
import { compatible } from "../js/conn.js";
import { addUsage, laterUsage, Store } from "../js/store.js";
import { agentLabel, ModelChoice, defaultModel, modelField, splitWords, mcpServersField } from "../js/overview.js";
import { Entry, Title, ModelPicker, agentUsage, contextFill, fmtTokens, runsOn } from "../js/agent.js";
import { UI, Permission } from "../js/dialogs.js";
import { RunSteers } from "../js/side.js";
import { checkAdd, MAX_IMAGES, MAX_IMAGE_BYTES, setImageSource } from "../js/images.js";
import { emptyTeam, applyTeamEvent, upsertTasks, boardColumns, depEdges, goalTasks, taskNumbers, openDecisions, replaceOpenDecisions, goalCost, decisionOptions, prioritizeArg, addFeed } from "../js/team.js";
import { Board, Decisions, Memory, ViewNav, defaultCwd } from "../js/teamview.js";
import { clustered, remoteNode, unreachableNode, healthCounts, loadText, dashboardURL, ClusterChip, NodeBadge, RemoteAgent, failoverTarget, failoverHash, splitFailover, failoverNote, Moved } from "../js/cluster.js";
import { render } from "../vendor/preact.mjs";
import { html } from "../js/html.js";

const tests = [];
const test = (name, fn) => tests.push({ name, fn });
function eq(got, want, what) {
  const g = JSON.stringify(got), w = JSON.stringify(want);
  if (g !== w) throw new Error(`${what}: got ${g}, want ${w}`);
}
const run = (evs, s = initial()) => evs.reduce(reduce, s);
const texts = (s) => s.items.filter((e) => e.kind === "message").map((e) => e.role + ":" + e.blocks.map((b) => b.text).join("|"));
const ids = (s) => s.items.map((e) => e.id);

const user = (id, text) => ({ id, role: "user", content: [{ type: "text", text }] });
const asst = (id, text) => ({ id, role: "assistant", content: [{ type: "text", text }] });

test("syntax: language by extension, unknown is plain", () => {
  eq([langOf("a/b.go"), langOf("x.TSX"), langOf("run.sh"), langOf("README"), langOf("notes.md")], ["go", "js", "sh", "", ""], "langs");
  eq(tokenize("x := 1", ""), [{ t: "x := 1", c: "" }], "plain");
});

test("syntax: keywords, strings, numbers, comments; the line comes back whole", () => {
  const line = 'func f() { return "a\\"b" + 42 } // done';
  const toks = tokenize(line, "go");
  eq(toks.map((k) => k.t).join(""), line, "round trip");
  const of = (c) => toks.filter((k) => k.c === c).map((k) => k.t.trim());
  eq(of("kw"), ["func", "return"], "keywords");
  eq(of("str"), ['"a\\"b"'], "string with an escaped quote");
  eq(of("num"), ["42"], "number");
  eq(of("com"), ["// done"], "comment");
  eq(tokenize("x2 = 3 # py", "py").filter((k) => k.c).map((k) => k.c), ["num", "com"], "x2 is a name, not a number");
  eq(tokenize('s = "open', "js").map((k) => k.c), ["", "str"], "an unclosed string runs to the line's end");
});

test("job card: create, wait, status and stop answers; anything else is no card", () => {
  const create = jobCardData({ job_id: "job-1", strategy: "parallel", runs: [{ run_id: "run-1", name: "a", state: "queued", agent_id: "agent-1" }, { run_id: "run-2", name: "b", state: "queued", agent_id: "agent-2" }] });
  eq(create.map((j) => [j.job_id, j.strategy, j.runs.map((r) => r.run_id)]), [["job-1", "parallel", ["run-1", "run-2"]]], "create");
  const wait = jobCardData({ timed_out: false, aggregate_state: "completed", runs: [{ job_id: "job-1", run_id: "run-1", state: "completed" }, { job_id: "job-2", run_id: "run-3", state: "failed" }] });
  eq(wait.map((j) => [j.job_id, j.runs.map((r) => r.state)]), [["job-1", ["completed"]], ["job-2", ["failed"]]], "wait groups runs by job");
  const status = jobCardData({ agents: [{ agent_id: "agent-1", alias: "x", run: { job_id: "job-1", run_id: "run-1", state: "active" } }], jobs: [{ job_id: "job-1", strategy: "single", state: "running", runs: [{ run_id: "run-1", state: "active" }] }] });
  eq(status.map((j) => [j.job_id, j.state, j.runs.length]), [["job-1", "running", 1]], "status: a run named twice shows once");
  eq(jobCardData({ cancelled: [{ run_id: "run-1", state: "cancelled" }], job_id: "job-1" })[0].runs[0].state, "cancelled", "stop");
  eq([jobCardData(null), jobCardData("text"), jobCardData({ other: 1 }), jobCardData({ runs: [] })], [null, null, null, null], "no card");
});

test("backoff is 1, 2, 4 … capped at 30 s", () => {
  eq([0, 1, 2, 3, 4, 5, 6, 40].map(backoffDelay), [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000], "delays");
});

test("text and thinking deltas build a message; complete reconciles", () => {
  let s = run([
    { type: "message_delta", message_id: "m1", block_index: 0, kind: "thinking", text_delta: "hm" },
    { type: "message_delta", message_id: "m1", block_index: 1, kind: "text", text_delta: "Hel" },
    { type: "message_delta", message_id: "m1", block_index: 1, kind: "text", text_delta: "lo" },
  ]);
  eq(s.items[0].blocks.map((b) => [b.type, b.text]), [["thinking", "hm"], ["text", "Hello"]], "blocks");
  eq(s.items[0].complete, false, "complete");
  s = reduce(s, { type: "message_complete", message_id: "m1", message: { id: "m1", role: "assistant", content: [{ type: "thinking", text: "hm" }, { type: "text", text: "Hello!" }] } });
  eq(texts(s), ["assistant:hm|Hello!"], "reconciled");
  // a late delta after complete is dropped
  s = reduce(s, { type: "message_delta", message_id: "m1", block_index: 1, kind: "text", text_delta: "x" });
  eq(texts(s), ["assistant:hm|Hello!"], "late delta");
});

test("tool call and result keep descriptors, exit code, duration", () => {
  const s = run([
    { type: "message_delta", message_id: "m1", block_index: 0, kind: "tool_call", tool_call_id: "t1", name: "bash" },
    { type: "message_delta", message_id: "m1", block_index: 0, kind: "tool_call", args_delta: "{\"command\":" },
    { type: "tool_call", tool_call_id: "t1", name: "bash", args: { command: "ls" }, read_only: false },
    { type: "tool_result", tool_call_id: "t1", content: { kind: "text", text: "a\nb" }, is_error: false, exit_code: 0, duration_ms: 5,
      render: { kind: "path_list", paths: [{ path: "a", kind: "file" }] } },
  ]);
  const t = s.items.find((e) => e.id === "t1");
  eq([t.name, t.args.command, t.result.exit_code, t.result.duration_ms, t.result.render.kind], ["bash", "ls", 0, 5, "path_list"], "tool");
  eq(ids(s), ["m1", "t1"], "order");
});

test("events seen twice never duplicate", () => {
  const evs = [
    { type: "message_complete", message_id: "m1", message: asst("m1", "hi") },
    { type: "tool_call", tool_call_id: "t1", name: "read", args: { path: "x" } },
    { type: "turn_end", turn_id: "u1", usage: { input: 1, output: 2 } },
    { type: "compaction", index: 1, tokens_before: 10, tokens_after: 2, first_kept_entry_id: "m1", message_range: ["a", "b"] },
    { type: "permission_request", request_id: "r1", tool_name: "write", options: ["allow", "deny"], prompt: "?" },
  ];
  const s = run([...evs, ...evs]);
  eq(ids(s), ["m1", "t1", "turn:u1", "compaction:1"], "items");
  eq(s.pending.length, 1, "pending");
});

test("resolution closes the request and records who answered", () => {
  let s = run([{ type: "permission_request", request_id: "r1", tool_name: "write", options: ["allow"], prompt: "?" },
    { type: "permission_resolved", request_id: "r1", decision: "allow", source: "websocket" }]);
  eq(s.pending.length, 0, "pending");
  eq(s.resolved, [{ request_id: "r1", kind: "permission", answer: "allow", source: "websocket" }], "resolved");
  // a re-broadcast of a resolved request does not reopen it
  s = reduce(s, { type: "permission_request", request_id: "r1", tool_name: "write", options: ["allow"], prompt: "?" });
  eq(s.pending.length, 0, "reopened");
});

test("resync replaces local and partial entries, keeps annotations, no duplicates", () => {
  let s = run([
    { type: "sync", status: "idle", mode: "build", live_window: { messages: [user("u1", "one"), asst("a1", "answer one")] }, pending_requests: [] },
  ]);
  s = addLocalPrompt(s, "two");
  s = run([
    { type: "status", status: "streaming" },
    { type: "tool_call", tool_call_id: "t1", name: "read", args: { path: "f" }, render: { kind: "code", path: "f", text: "x" } },
    { type: "tool_result", tool_call_id: "t1", content: { kind: "text", text: "x" }, is_error: false, render: { kind: "code", path: "f", text: "x" } },
    { type: "message_delta", message_id: "a2", block_index: 0, kind: "text", text_delta: "answer t" },
    { type: "turn_end", turn_id: "turn1", usage: { input: 3, output: 4 } },
  ], s);
  // the connection drops; the new sync has the whole exchange
  const sync = { type: "sync", status: "idle", mode: "build", live_window: { messages: [
    user("u1", "one"), asst("a1", "answer one"), user("u2", "two"),
    { id: "a2x", role: "assistant", content: [{ type: "tool_call", id: "t1", name: "read", args: { path: "f" } }] },
    { id: "u3", role: "user", content: [{ type: "tool_result", tool_call_id: "t1", content: { kind: "text", text: "x" } }] },
    asst("a2", "answer two"),
  ] }, pending_requests: [{ type: "permission_request", request_id: "r9", tool_name: "bash", options: ["deny"], prompt: "?" }] };
  s = reduce(s, sync);
  eq(texts(s).filter((x) => x !== "user:" && x !== "assistant:"), ["user:one", "assistant:answer one", "user:two", "assistant:answer two"], "messages once");
  const t = s.items.find((e) => e.id === "t1");
  eq(t.render && t.render.kind, "code", "call descriptor kept");
  eq(t.result.render && t.result.render.kind, "code", "result descriptor kept");
  eq(s.items.filter((e) => e.id === "turn:turn1").length, 1, "turn marker once");
  eq(s.items[s.items.length - 1].id, "turn:turn1", "turn marker after its message");
  eq(s.pending.map((p) => p.request_id), ["r9"], "pending from sync");
  // the same sync again changes nothing
  eq(ids(reduce(s, sync)), ids(s), "idempotent");
});

test("a compaction marker survives when its anchor is compacted away", () => {
  let s = run([
    { type: "sync", status: "idle", live_window: { messages: [user("u1", "a"), asst("a1", "b")] }, pending_requests: [] },
    { type: "compaction", index: 2, tokens_before: 100, tokens_after: 10 },
  ]);
  s = reduce(s, { type: "sync", status: "idle", live_window: { messages: [asst("a9", "summary")] }, pending_requests: [] });
  eq(ids(s), ["compaction:2", "a9"], "items");
});

test("resultText covers every content kind", () => {
  eq([resultText({ kind: "text", text: "t" }), resultText({ kind: "error", message: "e" }), resultText({ kind: "json", value: { a: 1 } }), resultText(null)],
    ["t", "e", "{\n  \"a\": 1\n}", ""], "texts");
});

test("queued prompts: a turn end starts steers and the oldest follow-up; abort drops the rest", () => {
  let s = addLocalPrompt(initial(), "first");
  s = addLocalPrompt(s, "steer", "steer");
  s = addLocalPrompt(s, "f1", "follow_up");
  s = addLocalPrompt(s, "f2", "follow_up");
  const marks = (s) => s.items.filter((e) => e.kind === "message").map((e) => (e.queued || "") + (e.dropped ? "dropped" : ""));
  eq(marks(s), ["", "steer", "follow_up", "follow_up"], "queued on send");
  s = reduce(s, { type: "turn_end", turn_id: "t1" });
  eq(marks(s), ["", "", "", "follow_up"], "after the first turn");
  s = dropQueued(s);
  eq(marks(s), ["", "", "", "dropped"], "after the abort");
  eq(dropQueued(s), s, "nothing queued: unchanged");
});

// ---- images, usage, versions, titles ----

// A 1×1 PNG.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const img = { type: "image", data: PNG, mime_type: "image/png" };

test("images: a sync's user message keeps its image blocks; a local prompt carries its images", () => {
  const msg = { id: "u1", role: "user", content: [{ type: "text", text: "look" }, img] };
  let s = reduce(initial(), { type: "sync", status: "idle", mode: "build", live_window: { messages: [msg] }, pending_requests: [] });
  eq(s.items[0].images, [img], "synced images");
  eq(texts(s), ["user:look"], "text kept");
  s = addLocalPrompt(s, "", undefined, [{ id: "x", name: "a.png", ...img }]);
  eq([s.items[1].blocks.length, s.items[1].images], [0, [img]], "images-only local prompt");
  // a stored image is named by its digest (docs/protocol.md §13 P4)
  const sha = "a".repeat(64);
  s = reduce(initial(), { type: "message_complete", message_id: "m", message: { id: "m", role: "user", content: [{ type: "image", mime_type: "image/png", sha256: sha, size: 70 }] } });
  eq(s.items[0].images, [{ type: "image", sha256: sha, mime_type: "image/png", size: 70 }], "stored image");
  // image blocks with neither bytes nor digest are skipped, never drawn broken
  s = reduce(initial(), { type: "message_complete", message_id: "m", message: { id: "m", role: "user", content: [{ type: "image", mime_type: "image/png" }] } });
  eq(s.items[0].images, [], "no data, no image");
});

test("images: the page's bounds", () => {
  const f = (name, type, size) => ({ name, type, size });
  eq(checkAdd([], [f("a.png", "image/png", 10)]), "", "fine");
  eq(checkAdd([], [f("a.txt", "text/plain", 10)]), "a.txt is not an image", "not an image");
  eq(checkAdd([], [f("a.bmp", "image/bmp", 10)]), "a.bmp is image/bmp: only PNG, JPEG, GIF and WebP images can be sent", "a type no provider takes");
  eq(checkAdd([], [f("a.jpg", "image/jpeg", 10), f("b.webp", "image/webp", 10), f("c.gif", "image/gif", 10)]), "", "the four types");
  eq(checkAdd([], [f("big.png", "image/png", MAX_IMAGE_BYTES + 1)]), "big.png is larger than 5 MiB", "too large");
  eq(checkAdd(new Array(MAX_IMAGES).fill({}), [f("a.png", "image/png", 1)]), "at most 16 images in one prompt", "too many");
});

test("usage: live context size, compaction, daemon totals that only grow", () => {
  let s = run([
    { type: "usage", input: 100, output: 20, context_tokens: 120 },
    { type: "usage", input: 150, output: 30, context_tokens: 300 },
  ]);
  eq(s.usage, { input: 250, output: 50, cost: 0, context_tokens: 300 }, "summed, latest context");
  s = reduce(s, { type: "compaction", index: 1, tokens_before: 300, tokens_after: 40, first_kept_entry_id: "x", message_range: ["a", "b"] });
  eq(s.usage.context_tokens, 40, "compaction shrinks the context");
  s = mergeSync(s, { type: "sync", status: "idle", mode: "build", live_window: { messages: [] }, pending_requests: [] });
  eq(s.usage.context_tokens, 40, "a resync keeps it");
  eq(addUsage({ input: 1, output: 2, cost: 0.5, context_tokens: 9 }, { input: 10, output: 20, cost: 1, context_tokens: 30, model: "m" }),
    { input: 11, output: 22, cost: 1.5, context_tokens: 30, cache_read: 0, cache_write: 0, model: "m" }, "addUsage");
  eq(laterUsage({ input: 10, output: 10 }, { input: 5, output: 5 }), { input: 10, output: 10 }, "an older answer does not go back");
  eq(laterUsage({ input: 10, output: 10 }, { input: 15, output: 5 }), { input: 15, output: 5 }, "the daemon's newer totals win");
  eq(laterUsage(undefined, { input: 1, output: 0 }), { input: 1, output: 0 }, "first");
  eq(agentUsage({ usage: { input: 7, output: 1 } }, initial()), { input: 7, output: 1 }, "AgentInfo.usage after a reload");
  eq(contextFill(50000, 200000), { tokens: 50000, window: 200000, pct: 25 }, "fill");
  eq([contextFill(0, 100), contextFill(10, 0)], [null, null], "unknown");
  eq([fmtTokens(950), fmtTokens(12345), fmtTokens(1500), fmtTokens(2500000)], ["950", "12k", "1.5k", "2.5M"], "fmtTokens");
});

test("protocol_version: the page speaks major 0", () => {
  eq(["0.1.0", "0.9.12", "0.1.0-rc.1", "1.0.0", "2.1.0", "", "0.1", undefined, 1].map(compatible),
    [true, true, true, false, false, false, false, false, false], "compatible");
});

test("titles: title, then display name, name, id", () => {
  eq([agentLabel({ agent_id: "a", title: "T", name: "n" }), agentLabel({ agent_id: "a", display_name: "d · x", name: "n" }),
    agentLabel({ agent_id: "a", name: "n" }), agentLabel({ agent_id: "a" })], ["T", "d · x", "n", "a"], "labels");
});

// ---- components, drawn in this page's DOM ----

const tick = () => new Promise((r) => setTimeout(r, 0));
// settle waits until cond() holds, a macrotask at a time (promise chains
// and preact's batched renders end within a few).
async function settle(cond, what) {
  for (let i = 0; i < 500; i++) { if (cond()) return; await tick(); }
  throw new Error("never settled: " + what);
}
async function mount(vnode) {
  const el = document.createElement("div");
  document.body.appendChild(el);
  render(vnode, el);
  await tick();
  return { el, q: (sel) => el.querySelector(sel), qa: (sel) => [...el.querySelectorAll(sel)], done: () => { render(null, el); el.remove(); } };
}
function fakeStore() {
  const calls = [];
  return { calls, answerUI: (req, v) => { calls.push(["ui", v]); return Promise.resolve(); },
    answerPermission: (req, c, reason) => { calls.push(["perm", c.id || c.decision, reason]); return Promise.resolve(); },
    rename: (id, title) => { calls.push(["rename", id, title]); return Promise.resolve(true); },
    send: (text, behavior, images) => { calls.push(["send", text, images.length]); return Promise.resolve(true); },
    note: (t) => calls.push(["note", t]), abort: () => {} };
}
const input = (el, v) => { el.value = v; el.dispatchEvent(new Event("input", { bubbles: true })); };
const S = { selected: "agent-1", agents: {}, transcript: initial() };

test("component: a transcript message draws its images as thumbnails", async () => {
  const m = await mount(html`<${Entry} e=${{ kind: "message", id: "u1", role: "user", blocks: [{ type: "text", text: "see" }], images: [img], complete: true }} pendingTools=${new Set()} />`);
  const im = m.q(".msg.user img.msg-img");
  if (!im || !im.src.startsWith("blob:")) throw new Error("no blob thumbnail: " + m.el.innerHTML);
  await im.decode();
  eq([im.naturalWidth, im.dataset.mime], [1, "image/png"], "decoded");
  m.done();
});

test("component: a stored image is fetched once by its digest and drawn", async () => {
  const asked = [];
  setImageSource((sha) => { asked.push(sha); return Promise.resolve(img); });
  const sha = "b".repeat(64);
  const e = { kind: "message", id: "u2", role: "user", blocks: [], images: [{ type: "image", sha256: sha, mime_type: "image/png", size: 70 }], complete: true };
  const m = await mount(html`<div><${Entry} e=${e} pendingTools=${new Set()} /><${Entry} e=${{ ...e, id: "u3" }} pendingTools=${new Set()} /></div>`);
  await settle(() => m.qa("img.msg-img").length === 2, "both drawn");
  const ims = m.qa("img.msg-img");
  await ims[0].decode();
  eq([ims[0].naturalWidth, ims[0].dataset.sha256, asked], [1, sha, [sha]], "fetched once");
  m.done();
  setImageSource(null);
});

test("component: select with multiple answers string[] from checkboxes", async () => {
  const st = fakeStore();
  const m = await mount(html`<${UI} req=${{ request_id: "r", kind: "select", multiple: true, title: "Pick", options: ["a", "b", "c"] }} s=${S} store=${st} />`);
  eq(m.qa('input[type=checkbox]').length, 3, "checkboxes");
  m.q('input[data-option="c"]').click();
  m.q('input[data-option="a"]').click();
  await tick();
  m.q('button[data-choice="submit"]').click();
  eq(st.calls, [["ui", ["a", "c"]]], "in the options' order");
  m.done();
});

test("component: select without multiple, confirm, input, editor, notify", async () => {
  const cases = [
    [{ kind: "select", options: ["x", "y"] }, (m) => m.q('button[data-choice="y"]').click(), "y"],
    [{ kind: "confirm", title: "Sure?" }, (m) => m.q('button[data-choice="yes"]').click(), "yes"],
    [{ kind: "confirm", title: "Sure?" }, (m) => m.q('button[data-choice="no"]').click(), "no"],
    [{ kind: "input", placeholder: "name" }, async (m) => { input(m.q("input"), "typed"); await tick(); m.q('button[data-choice="submit"]').click(); }, "typed"],
    [{ kind: "editor", prefill: "line one" }, async (m) => {
      eq(m.q("textarea").value, "line one", "prefill");
      input(m.q("textarea"), "line one\nline two"); await tick(); m.q('button[data-choice="submit"]').click(); }, "line one\nline two"],
    [{ kind: "notify", message: "done", notify_type: "warning" }, (m) => m.q('button[data-choice="ok"]').click(), null],
  ];
  for (const [req, act, want] of cases) {
    const st = fakeStore();
    const m = await mount(html`<${UI} req=${{ request_id: "r", ...req }} s=${S} store=${st} />`);
    await act(m);
    eq(st.calls, [["ui", want]], req.kind);
    m.done();
  }
});

test("component: a refusal carries the reason; structured choices answer by id", async () => {
  let st = fakeStore();
  let m = await mount(html`<${Permission} req=${{ request_id: "p", tool_name: "bash", prompt: "run?", options: ["allow", "deny"],
    choices: [{ id: "c-ok", label: "Allow once", intent: "allow" }, { id: "c-always", label: "Always allow go test", intent: "persist" }, { id: "c-no", label: "No", intent: "deny" }] }} s=${S} store=${st} />`);
  eq(m.qa("button.choice").map((b) => b.dataset.choice), ["c-ok", "c-always", "c-no"], "the server's choices");
  input(m.q("input.reason"), "use make instead");
  await tick();
  m.q('button[data-choice="c-no"]').click();
  eq(st.calls, [["perm", "c-no", "use make instead"]], "deny with reason");
  m.done();
  st = fakeStore();
  m = await mount(html`<${Permission} req=${{ request_id: "p2", tool_name: "write", prompt: "?", options: ["allow", "allow_always", "deny"] }} s=${S} store=${st} />`);
  input(m.q("input.reason"), "not that file");
  await tick();
  m.q('button[data-choice="allow"]').click();
  eq(st.calls, [["perm", "allow", ""]], "an allow carries no reason");
  m.done();
});

test("component: the model picker groups several providers' models and marks the active one", async () => {
  const models = [
    { id: "sim/sim", provider: "sim", model: "sim" },
    { id: "oa/gpt-x", provider: "oa", model: "gpt-x", context_window: 128000 },
    { id: "an/claude-y", provider: "an", model: "claude-y" },
    { id: "oa/gpt-z", provider: "oa", model: "gpt-z" },
  ];
  const picked = [];
  const st = { setModel: (id) => picked.push(id) };
  const s = { models, activeModel: models[1] };
  const m = await mount(html`<${ModelPicker} s=${s} t=${initial()} a=${{}} store=${st} />`);
  eq(m.qa("optgroup").map((g) => g.label + ":" + [...g.querySelectorAll("option")].map((o) => o.textContent).join(",")),
    ["sim:sim · sim", "oa:oa · gpt-x,oa · gpt-z", "an:an · claude-y"], "grouped by provider");
  eq(m.q("#model").value, "oa/gpt-x", "the active model");
  const sel = m.q("#model");
  sel.value = "an/claude-y";
  sel.dispatchEvent(new Event("change", { bubbles: true }));
  eq(picked, ["an/claude-y"], "set_model by id");
  m.done();
});

test("component: a run's recorded steers show source, outcome, turn and time", async () => {
  const steers = [
    { correlation_id: "c1", source: "parent", status: "injected", turn_id: "turn-7", at: Date.now() - 5000 },
    { correlation_id: "c2", source: "client", status: "conflict", at: Date.now() },
  ];
  const m = await mount(html`<${RunSteers} steers=${steers} />`);
  eq(m.qa(".rsteer").map((e) => [e.dataset.source, e.dataset.status, e.dataset.turn, e.querySelector(".src").textContent, !!e.querySelector("time[datetime]")]),
    [["parent", "injected", "turn-7", "parent", true], ["client", "conflict", "", "person", true]], "rows");
  eq(m.q(".rsteer.bad .turn"), null, "a conflict names no turn");
  m.done();
  const none = await mount(html`<div><${RunSteers} steers=${undefined} /></div>`);
  eq(none.qa(".run-steers").length, 0, "a run without steers lists none");
  none.done();
});

test("component: a create form's model field: the daemon's catalog, default preselected; text without one", async () => {
  const models = [
    { id: "sim/sim", provider: "sim", model: "sim" },
    { id: "local/qwen3", provider: "local", model: "qwen3" },
    { id: "local/llama", provider: "local", model: "llama" },
  ];
  const catalog = { models, default: models[2] };
  eq([defaultModel(catalog), defaultModel({ models, default: { id: "gone/x" } }), defaultModel({ models: [] }), defaultModel(null)],
    ["local/llama", "sim/sim", "", ""], "default: the catalog's, else the first, else none");
  eq([modelField("", catalog), modelField("sim/sim", catalog), modelField("", null), modelField("typed", null)],
    ["local/llama", "sim/sim", "", "typed"], "what is sent");
  const got = [];
  let m = await mount(html`<${ModelChoice} id="mc" catalog=${catalog} value="" onChange=${(v) => got.push(v)} />`);
  eq(m.q("#mc").tagName, "SELECT", "a picker");
  eq(m.qa("optgroup").map((g) => g.label + ":" + [...g.querySelectorAll("option")].map((o) => o.textContent).join(",")),
    ["sim:sim · sim", "local:local · qwen3,local · llama (default)"], "grouped by provider, provider · model");
  eq(m.q("#mc").value, "local/llama", "the default preselected");
  m.q("#mc").value = "local/qwen3";
  m.q("#mc").dispatchEvent(new Event("change", { bubbles: true }));
  eq(got, ["local/qwen3"], "the pick is the descriptor id");
  m.done();
  for (const empty of [null, { models: [], default: null }]) {
    m = await mount(html`<${ModelChoice} id="mc" catalog=${empty} value="" onChange=${(v) => got.push(v)} />`);
    eq(m.q("#mc").tagName, "INPUT", "no catalog: a text field");
    input(m.q("#mc"), "oa/gpt-x");
    m.done();
  }
  eq(got.slice(1), ["oa/gpt-x", "oa/gpt-x"], "a typed model id");
  eq([runsOn({ provider: "local", model: "qwen3" }), runsOn({ model: "sim" }), runsOn({})], ["local · qwen3", "sim", ""], "what an agent runs");
});

test("store: a poll takes provider and model, but not over a model_changed it predates", async () => {
  const st = new Store();
  // One answer per poll: every agent.list page a poll asks (the live and
  // the recent agents) waits for it.
  let gate;
  const nextPoll = () => { let answer; gate = { p: new Promise((res) => { answer = res; }) }; gate.answer = answer; };
  st.conn.call = (msg) => msg.type === "agent.list" ? gate.p : Promise.reject(new Error("offline"));
  const info = (id, provider, model) => ({ agent_id: id, provider, model, status: "idle", cwd: "/" });
  st.set({ selected: "a1", agents: { a1: info("a1", "sim", "sim"), a2: info("a2", "sim", "sim") } });
  // A poll is asked; then a model_changed of the attached agent arrives;
  // then the poll's answer, read before the switch.
  nextPoll();
  const p1 = st.refreshAgents(true);
  st.onEvent({ type: "model_changed", agent_id: "a1", previous: { id: "sim/sim", provider: "sim", model: "sim" }, active: { id: "local/qwen3", provider: "local", model: "qwen3" } });
  gate.answer({ agents: [info("a1", "sim", "sim"), info("a2", "local", "llama")] });
  await p1;
  const runs = () => ["a1", "a2"].map((id) => st.state.agents[id].provider + "/" + st.state.agents[id].model);
  eq(runs(), ["local/qwen3", "local/llama"], "the event's switch kept; another agent's switch from the poll");
  // The next poll, read after the switch, is the daemon's word.
  nextPoll();
  const p2 = st.refreshAgents(true);
  gate.answer({ agents: [info("a1", "anthropic", "claude"), info("a2", "local", "llama")] });
  await p2;
  eq(runs(), ["anthropic/claude", "local/llama"], "a later poll");
});

test("component: the title with the id secondary, and rename", async () => {
  const st = fakeStore();
  let m = await mount(html`<${Title} a=${{ agent_id: "agent-01abc", title: "Fix the parser" }} store=${st} />`);
  eq([m.q("#agent-title").textContent, m.q("#agent-id").textContent], ["Fix the parser", "agent-01abc"], "title and id");
  m.q("#rename").click();
  await tick();
  eq(m.q("#title-input").value, "Fix the parser", "edits the title");
  input(m.q("#title-input"), "Parser fixes");
  await tick();
  m.q("#title-save").click();
  await tick();
  eq(st.calls, [["rename", "agent-01abc", "Parser fixes"]], "agent.update");
  m.done();
  m = await mount(html`<${Title} a=${{ agent_id: "agent-01abc" }} store=${st} />`);
  eq([m.q("#agent-title").textContent, !!m.q("#agent-id")], ["agent-01abc", false], "no title: the id, once");
  m.done();
});


// ---- the team view (docs/protocol.md §10.4) ----

const task = (id, state, extra = {}) => ({ task_id: id, goal_id: "g1", title: "T " + id, state, priority: 0, deps: [], ci: { status: "unknown" }, created_at: Number(id.slice(1)), updated_at: 1, revision: 1, ...extra });
const dec = (id, kind, extra = {}) => ({ decision_id: id, goal_id: "g1", kind, question: "Q " + id, options: [], state: "open", created_at: Number(id.slice(1)), updated_at: 1, ...extra });

test("team: events upsert by id; an older record never replaces a newer one", () => {
  let t = emptyTeam();
  t = applyTeamEvent(t, { type: "team_goal_changed", goal: { goal_id: "g1", text: "x", status: "planning", updated_at: 1 } });
  t = applyTeamEvent(t, { type: "team_task_changed", task: task("t1", "todo", { revision: 2 }) });
  t = applyTeamEvent(t, { type: "team_task_changed", task: task("t1", "doing", { revision: 3 }) });
  t = upsertTasks(t, [task("t1", "todo", { revision: 2 })]); // a list answered before the event
  eq(t.tasks.t1.state, "doing", "the later revision stays");
  t = applyTeamEvent(t, { type: "team_memory_changed", entry: { memory_id: "m1", scope: "shared", key: "k", body: "b", updated: 1 } });
  eq(Object.keys(t.memory), ["m1"], "memory written");
  t = applyTeamEvent(t, { type: "team_memory_changed", entry: { memory_id: "m1", scope: "shared", key: "k", body: "", updated: 2 }, deleted: true });
  eq(Object.keys(t.memory), [], "memory deleted");
  t = applyTeamEvent(t, { type: "team_feed_added", item: { feed_id: "f1", kind: "goal", text: "a", at: 1 } });
  t = applyTeamEvent(t, { type: "team_feed_added", item: { feed_id: "f2", kind: "plan", text: "b", at: 2 } });
  t = addFeed(t, [{ feed_id: "f1", kind: "goal", text: "a", at: 1 }]);
  eq(t.feed.map((x) => x.feed_id), ["f2", "f1"], "feed newest first, once each");
  eq(applyTeamEvent(t, { type: "agent_spawned" }), null, "not a team event");
});

test("team: columns by state and priority; cancelled hidden unless asked; arrows between shown cards", () => {
  let t = upsertTasks(emptyTeam(), [task("t1", "done"), task("t2", "todo", { deps: ["t1"] }), task("t3", "todo", { priority: 5, deps: ["t1", "t2"] }), task("t4", "cancelled"), task("t5", "todo", { deps: ["t4"] })]);
  const tasks = goalTasks(t, "g1");
  eq(taskNumbers(tasks), { t1: 1, t2: 2, t3: 3, t4: 4, t5: 5 }, "numbers in creation order");
  const cols = boardColumns(tasks, false);
  eq(Object.keys(cols), ["todo", "doing", "review", "done", "blocked"], "columns");
  eq(cols.todo.map((x) => x.task_id), ["t3", "t2", "t5"], "priority first, then creation order");
  eq(boardColumns(tasks, true).cancelled.map((x) => x.task_id), ["t4"], "cancelled on request");
  const shown = new Set(Object.values(cols).flat().map((x) => x.task_id));
  eq(depEdges(tasks, shown), [{ from: "t1", to: "t2" }, { from: "t1", to: "t3" }, { from: "t2", to: "t3" }], "no arrow from a hidden card");
  eq(prioritizeArg(tasks[1], tasks), "6", "one above the highest waiting task");
});

test("team: the queue is the open decisions, newest last; options by kind; cost against the limit", () => {
  let t = { ...emptyTeam(), decisions: { d2: dec("d2", "merge"), d1: dec("d1", "question", { options: ["yes", "no"] }), d3: dec("d3", "permission", { state: "answered" }) } };
  eq(openDecisions(t).map((d) => d.decision_id), ["d1", "d2"], "open, oldest first");
  eq([decisionOptions(t.decisions.d2), decisionOptions(t.decisions.d1), decisionOptions(dec("d9", "question"))], [["Merge", "Request changes", "Reject"], ["yes", "no"], []], "options");
  t = replaceOpenDecisions(t, [dec("d2", "merge"), dec("d4", "permission")]);
  eq(Object.keys(t.decisions).sort(), ["d2", "d3", "d4"], "an open decision the list lacks was closed away");
  eq([goalCost({ cost_usd: 0.012, cost_limit_usd: 5 }), goalCost({ cost_usd: 2 }), goalCost({ cost_usd: 6, cost_limit_usd: 5 }).over],
    [{ text: "$0.0120 / $5.00", over: false }, { text: "$2.00", over: false }, true], "cost");
});

test("store: a decision that opens notifies (when allowed); one another client closes leaves a note (an agent that answered by its name), the page's own answer none", async () => {
  const real = globalThis.Notification;
  const seen = [];
  globalThis.Notification = class { static permission = "granted"; constructor(title, o) { seen.push([title, o.tag]); } };
  try {
    const st = new Store();
    st.conn.call = (msg) => msg.type === "team.decision.answer"
      ? Promise.resolve({ decision: dec(msg.decision_id, "merge", { state: "answered", updated_at: 2 }) }) : Promise.reject(new Error("offline"));
    const ev = (d) => st.onEvent({ type: "team_decision_changed", decision: d });
    ev(dec("d1", "merge"));
    ev(dec("d1", "merge", { updated_at: 2, refused_reason: "dirty" })); // still open: no second notice
    ev(dec("d2", "permission"));
    eq(seen, [["Shard: a decision waits (merge)", "shard-decision-d1"], ["Shard: a decision waits (permission)", "shard-decision-d2"]], "one notification per opening");
    eq(openDecisions(st.state.team).map((d) => d.decision_id), ["d1", "d2"], "queue");
    ev(dec("d2", "permission", { state: "answered", updated_at: 3, answer: { option: "Deny", by: "shardctl", at: 3 } }));
    eq(st.state.teamClosed.map((c) => [c.decision_id, c.text]), [["d2", "Answered elsewhere by shardctl: Deny — Q d2"]], "note");
    const { answerDecision } = await import("../js/team.js");
    await answerDecision(st, st.state.team.decisions.d1, "Merge", "");
    ev(dec("d1", "merge", { state: "answered", updated_at: 4 }));
    eq([st.state.teamClosed.length, openDecisions(st.state.team).length], [1, 0], "the page's own answer: no note");
    globalThis.Notification = class { static permission = "default"; constructor() { seen.push("asked"); } };
    ev(dec("d3", "question"));
    eq(seen.length, 2, "not allowed: no notification");
    st.set({ agents: { "agent-l": { agent_id: "agent-l", name: "lead-1", title: "lead" } } });
    ev(dec("d4", "question"));
    ev(dec("d4", "question", { state: "answered", updated_at: 3, answer: { option: "blue", by: "agent-l", at: 3 } }));
    ev(dec("d5", "question"));
    ev(dec("d5", "question", { state: "answered", updated_at: 3, answer: { option: "red", by: "agent-gone", at: 3 } }));
    eq(st.state.teamClosed.slice(1).map((c) => c.text), ["Answered elsewhere by lead: blue — Q d4", "Answered elsewhere by agent-gone: red — Q d5"], "an agent's answer: its name, else its id");
  } finally {
    globalThis.Notification = real;
  }
});

function teamStore(team, extra = {}) {
  const calls = [];
  return { calls, state: { team }, answered: new Set(), note: () => {}, setTeam: () => {}, loadGoal: () => {},
    setView: (v) => calls.push(["view", v]),
    conn: { call: (msg) => { calls.push(msg); return Promise.resolve(extra[msg.type] || {}); } } };
}
const teamS = (team, more = {}) => ({ team, agents: {}, selected: "", teamGoal: "g1", teamClosed: [], view: "team", ...more });

test("component: the board draws a card per task with its chips, and an arrow per dependency", async () => {
  const team = upsertTasks({ ...emptyTeam(), goals: { g1: { goal_id: "g1", text: "goal", status: "active" } } },
    [task("t1", "done", { branch: "team/t1", assignee: "agent-w", diff: { files: 2, additions: 5, deletions: 1, ahead: 1 }, ci: { status: "pass" } }), task("t2", "doing", { deps: ["t1"] }), task("t3", "todo", { deps: ["t1", "t2"] })]);
  const st = teamStore(team);
  const m = await mount(html`<${Board} s=${teamS(team)} store=${st} goal=${team.goals.g1} />`);
  await settle(() => m.qa("path.dep").length === 3, "three arrows");
  eq(m.qa('[data-col="done"] .card').map((e) => e.dataset.task), ["t1"], "done column");
  eq(m.q('[data-task="t3"] .after').textContent, "after: #1, #2", "chips");
  const c1 = m.q('[data-task="t1"]').textContent;
  eq([c1.includes("team/t1"), c1.includes("+5"), m.q('[data-task="t1"] .ci').dataset.ci], [true, true, "pass"], "branch, diff stat, CI");
  eq(m.qa("path.dep").map((p) => p.dataset.from + ">" + p.dataset.to), ["t1>t2", "t1>t3", "t2>t3"], "arrows");
  m.q('[data-task="t3"] .t-prio').click();
  await tick();
  eq(st.calls.filter((c) => c.type).map((c) => [c.type, c.task_id, c.action, c.arg]), [["team.task.action", "t3", "prioritize", "1"]], "prioritize");
  m.done();
});

test("component: a decision's options answer in order; a merge sends its feedback; a question in words", async () => {
  const team = { ...emptyTeam(), decisions: { d1: dec("d1", "merge", { options: ["Merge", "Request changes", "Reject"], refused_reason: "conflict in a.txt" }), d2: dec("d2", "question") } };
  const st = teamStore(team, { "team.decision.answer": { decision: dec("d1", "merge", { state: "answered" }) } });
  const m = await mount(html`<${Decisions} s=${teamS(team)} store=${st} />`);
  const d1 = '[data-decision="d1"]';
  eq(m.qa(d1 + " button.option").map((b) => b.dataset.option), ["Merge", "Request changes", "Reject"], "merge options in order");
  eq(m.q(d1 + " .refused").textContent, "Refused: conflict in a.txt", "refused reason");
  input(m.q(d1 + " textarea"), "rename the flag");
  await tick();
  m.q(d1 + ' button[data-option="Request changes"]').click();
  await tick();
  input(m.q('[data-decision="d2"] textarea'), "blue");
  await tick();
  m.q('[data-decision="d2"] button.option').click();
  await tick();
  const sent = st.calls.filter((c) => c.type === "team.decision.answer").map((c) => [c.decision_id, c.option || "", c.text || ""]);
  eq(sent, [["d1", "Request changes", "rename the flag"], ["d2", "", "blue"]], "answers");
  m.done();
});

test("component: the navigation counts the open decisions on every view; memory writes and deletes", async () => {
  const team = { ...emptyTeam(), decisions: { d1: dec("d1", "merge"), d2: dec("d2", "permission"), d3: dec("d3", "question", { state: "cancelled" }) },
    memory: { m1: { memory_id: "m1", scope: "shared", key: "style", title: "Style", body: "tabs", updated: 1 } } };
  const st = teamStore(team, { "team.memory.put": { entry: {} } });
  let m = await mount(html`<${ViewNav} s=${teamS(team, { view: "agents" })} store=${st} />`);
  eq(m.q("#team-badge").textContent, "2", "badge");
  m.q("#view-team").click();
  eq(st.calls, [["view", "team"]], "switch");
  m.done();
  m = await mount(html`<${Memory} s=${teamS(team)} store=${st} />`);
  eq([!!m.q("#team-mem-form"), !!m.q("#team-mem-new")], [false, true], "the form behind a button");
  m.q(".m-edit").click();
  await tick();
  eq([m.q("#team-mem-key").value, m.q("#team-mem-body").value], ["style", "tabs"], "edit fills the form");
  input(m.q("#team-mem-body"), "spaces");
  await tick();
  m.q("#team-mem-save").click();
  await tick();
  m.q(".m-del").click();
  await tick();
  eq(st.calls.filter((c) => c.type).map((c) => [c.type, c.key || c.memory_id, c.body || ""]), [["team.memory.put", "style", "spaces"], ["team.memory.delete", "m1", ""]], "put, delete");
  m.done();
  eq(defaultCwd(teamS({ ...emptyTeam(), goals: { g1: { goal_id: "g1", cwd: "/repo", created_at: 1 } } })), "/repo", "the goal's repository");
  eq(defaultCwd(teamS(emptyTeam(), { selected: "a", agents: { a: { agent_id: "a", cwd: "/w" } } })), "/w", "else the agent's directory");
});

test("create form: MCP rows become agent.create mcp_servers, words split as shardctl's --mcp", () => {
  eq(splitWords(`npx -y "a b" 'c d' e\\ f  `), ["npx", "-y", "a b", "c d", "e f"], "words");
  eq(splitWords(`x ""`), ["x", ""], "an empty quoted word");
  const err = (f) => { try { f(); return ""; } catch (e) { return e.message; } };
  eq(err(() => splitWords(`a "b`)), 'an unclosed "', "unclosed");
  eq(mcpServersField([]), undefined, "none");
  eq(mcpServersField([{ name: "", target: " " }]), undefined, "blank rows");
  eq(mcpServersField([{ name: "fs", target: "srv '/my dir'" }, { name: "web", target: "https://h/mcp" }, { name: "one", target: "solo" }]),
    { fs: { command: "srv", args: ["/my dir"] }, web: { url: "https://h/mcp" }, one: { command: "solo" } }, "stdio, http, bare command");
  eq(err(() => mcpServersField([{ name: "", target: "srv" }])), "MCP server: a name for srv", "no name");
  eq(err(() => mcpServersField([{ name: "fs", target: "" }])), "MCP server fs: a command or an http(s) URL", "no target");
  eq(err(() => mcpServersField([{ name: "fs", target: "a" }, { name: "fs", target: "b" }])), "MCP server fs is there twice", "twice");
  eq(err(() => mcpServersField([{ name: "fs", target: "srv 'x" }])), "MCP server fs: an unclosed '", "quote");
  eq(err(() => mcpServersField([{ name: "w", target: "https://h/mcp x" }])), "MCP server w: a URL takes no arguments", "url args");
});

test("cluster: clustered, an agent's node against the page's, an unreachable node's refusal, load", () => {
  const st = { enabled: true, node: "n1", nodes: [
    { node: "n1", health: "alive", incarnation: 2, load: { agents: 1, runtimes: 1, runs: 0 }, capacity: 8, self: true },
    { node: "n3", health: "dead", incarnation: 1, load: { agents: 2, runtimes: 0, runs: 1 }, capacity: 4 }] };
  eq([clustered(null), clustered({ enabled: false }), clustered(st)], [false, false, true], "clustered");
  eq([remoteNode({ agent_id: "a", node: "n3" }, st), remoteNode({ agent_id: "a", node: "n1" }, st), remoteNode({ agent_id: "a" }, st),
    remoteNode({ agent_id: "a", node: "n3" }, null), remoteNode({ agent_id: "a" }, null, { a: { node: "n2" } })], ["n3", "", "", "", "n2"], "remote");
  const msg = "agent a lives on node n3; this command was not forwarded there (name that node's agents alone)";
  eq([unreachableNode({ code: "NODE_UNAVAILABLE", message: "node n4 is unavailable: it is dead", data: { node: "n4" } }),
    unreachableNode({ code: "NODE_UNAVAILABLE", message: "?" }, "n2"),
    unreachableNode({ code: "UNSUPPORTED", message: msg }), unreachableNode({ code: "UNSUPPORTED", message: "?" }, "n2"),
    unreachableNode({ code: "NOT_FOUND", message: msg }), unreachableNode(null)], ["n4", "n2", "n3", "n2", "", ""], "refusal");
  eq(healthCounts(st), { alive: 1, suspect: 0, dead: 1 }, "health");
  eq(loadText(st.nodes[0]), "1 agent · 1 runtime · 0 runs / 8", "load");
  eq(loadText({ load: {} }), "0 agents · 0 runtimes · 0 runs", "no capacity");
  const web = { enabled: true, node: "n1", nodes: [
    { node: "n1", health: "alive", web_url: "http://127.0.0.1:7421" },
    { node: "n2", health: "alive", web_url: "https://b.example:8443/shard" },
    { node: "n3", health: "dead", web_url: "http://127.0.0.1:7423" },
    { node: "n4", health: "alive", web_url: "javascript:alert(1)" },
    { node: "n5", health: "alive" }] };
  eq(["n1", "n2", "n3", "n4", "n5", "n9"].map((n) => dashboardURL(web, n)),
    ["http://127.0.0.1:7421/", "https://b.example:8443/shard/", "", "", "", ""], "dashboards: alive, http(s), known");
  eq(dashboardURL(null, "n1"), "", "no status");
});

test("component: the cluster chip lists the nodes, the page's marked; nothing on a single shardd", async () => {
  const st = { enabled: true, node: "n2", nodes: [
    { node: "n1", health: "alive", incarnation: 1, load: { agents: 0, runtimes: 0, runs: 0 }, capacity: 8 },
    { node: "n2", health: "alive", incarnation: 3, load: { agents: 2, runtimes: 1, runs: 0 }, capacity: 8, self: true },
    { node: "n3", health: "suspect", incarnation: 1, load: { agents: 0, runtimes: 0, runs: 0 } }] };
  const m = await mount(html`<${ClusterChip} st=${st} />`);
  eq(m.q("#cluster summary").textContent, "node n2 · 2/3 alive", "summary");
  eq(m.qa(".cn").map((r) => [r.dataset.node, r.dataset.health, r.dataset.incarnation, r.dataset.self]),
    [["n1", "alive", "1", ""], ["n2", "alive", "3", "1"], ["n3", "suspect", "1", ""]], "rows");
  eq(m.qa(".cn .badge.self").length, 1, "one self");
  eq(m.q("#cluster").classList.contains("degraded"), true, "a suspect node shows");
  eq(m.qa(".cn .dash a").length, 0, "no web address, no link");
  m.done();
  st.nodes[0].web_url = "http://127.0.0.1:7421";
  st.nodes[1].web_url = "http://127.0.0.1:7422";
  st.nodes[2].web_url = "http://127.0.0.1:7423";
  const w = await mount(html`<${ClusterChip} st=${st} />`);
  eq(w.qa(".cn").map((r) => r.querySelector(".dash a")?.getAttribute("href") || ""),
    ["http://127.0.0.1:7421/", "", ""], "a link to each other alive node's dashboard (not this node's, not a suspect's)");
  eq(w.q(".cn .dash a").target, "_blank", "in a new tab");
  w.done();
  for (const off of [null, { enabled: false }]) {
    const n = await mount(html`<div><${ClusterChip} st=${off} /></div>`);
    eq(n.qa("#cluster").length, 0, "hidden unclustered");
    n.done();
  }
});

test("component: an agent's node badge, another node's agent marked; the note of an unreachable node", async () => {
  const m = await mount(html`<div><${NodeBadge} a=${{ agent_id: "a", node: "n1" }} remote=${""} /><${NodeBadge} a=${{ agent_id: "b", node: "n3" }} remote=${"n3"} /><${NodeBadge} a=${{ agent_id: "c" }} remote=${""} /></div>`);
  eq(m.qa(".badge.node").map((b) => [b.dataset.node, b.classList.contains("remote"), b.textContent]), [["n1", false, "n1"], ["n3", true, "on n3"]], "badges");
  m.done();
  let retried = 0;
  const r = await mount(html`<${RemoteAgent} a=${{ agent_id: "b", node: "n3", title: "fix", status: "idle" }} node="n3" why="node n3 is unavailable: it is dead" retry=${() => retried++} />`);
  eq(r.q(".remote-note").textContent.includes("lives on node n3, which this page's daemon cannot reach now: node n3 is unavailable: it is dead"), true, "note");
  r.q(".remote-note .retry").click();
  eq(retried, 1, "retry");
  eq(r.qa(".remote-note a").length, 0, "no address, no link");
  r.done();
  const st = { enabled: true, node: "n1", nodes: [{ node: "n3", health: "alive", web_url: "http://127.0.0.1:7423" }] };
  const l = await mount(html`<${RemoteAgent} a=${{ agent_id: "b", node: "n3" }} node="n3" st=${st} />`);
  eq([l.q(".remote-note a")?.getAttribute("href"), l.q(".remote-note").textContent.includes("Or open n3's dashboard")],
    ["http://127.0.0.1:7423/", true], "the note links n3's dashboard");
  l.done();
});

test("store: another node's agent is attached like any other; NODE_UNAVAILABLE marks it until an attach succeeds", async () => {
  const st = new Store();
  const sent = [];
  let down = true;
  st.conn.call = (msg) => {
    if (msg.type === "agent.attach") sent.push(msg.type + ":" + msg.agent_id);
    if (msg.type === "agent.attach" && msg.agent_id === "c" && down) {
      return Promise.reject(Object.assign(new Error("node n2 is unavailable: it is dead (its lease ran out)"), { code: "NODE_UNAVAILABLE", data: { node: "n2" } }));
    }
    if (msg.type === "agent.attach") return Promise.resolve({});
    return Promise.reject(new Error("offline"));
  };
  st.set({ cluster: { enabled: true, node: "n1", nodes: [] }, agents: { b: { agent_id: "b", node: "n3" }, c: { agent_id: "c", node: "n2" } } });
  await st.attach("b");
  eq([sent, st.state.elsewhere], [["agent.attach:b"], {}], "n3's agent attached");
  await st.attach("c");
  eq([sent.slice(1), st.state.elsewhere, st.state.notice], [["agent.attach:c"], { c: { node: "n2", why: "node n2 is unavailable: it is dead (its lease ran out)" } }, ""], "refused: marked, no failure notice");
  down = false;
  await st.attach("c");
  eq(st.state.elsewhere, {}, "back: the mark goes");
});

test("cluster: a lost node's page goes to the next node in name order, the address carries what it showed", async () => {
  const node = (n, health, web_url) => ({ node: n, health, web_url });
  const st = { enabled: true, node: "n3", nodes: [
    node("n5", "dead", "http://h5:1"), node("n1", "alive", "http://h1:1/"), node("n2", "suspect", "https://h2/shard"),
    node("n3", "alive", "http://h3:1"), node("n4", "alive", "javascript:alert(1)"), node("n6", "alive", "")] };
  eq(failoverTarget(st, "http://h3:1"), { node: "n1", url: "http://h1:1/" }, "after n3: n4 (no http), n5 (dead), n6 (no url), then n1");
  eq(failoverTarget(st, "http://h1:1"), { node: "n2", url: "https://h2/shard/" }, "a node at the page's own origin is passed over");
  eq([failoverTarget({ ...st, node: "n1" }, "http://h1:1")?.node, failoverTarget({ enabled: false }, "x"), failoverTarget(null, "x"),
    failoverTarget({ enabled: true, node: "n1", nodes: [node("n1", "alive", "http://h1:1")] }, "x")], ["n2", null, null, null], "n1's next; no cluster; alone");
  eq([failoverHash({ view: "agents", selected: "ag_1" }, "n2"), failoverHash({ view: "agents", selected: "" }, "n2"),
    failoverHash({ view: "team", teamGoal: "g1" }, "n2"), failoverHash({ view: "team", teamGoal: "" }, "n2")],
    ["#agent=ag_1&from=n2", "#from=n2", "#team=g1&from=n2", "#team&from=n2"], "hashes");
  eq(["#agent=ag_1&from=n2", "#from=n2", "#team=g1&from=n2", "#agent=ag_1", "", "#from=%3Cb%3E", "#agent=x_from"].map(splitFailover),
    [{ from: "n2", hash: "#agent=ag_1" }, { from: "n2", hash: "" }, { from: "n2", hash: "#team=g1" }, { from: "", hash: "#agent=ag_1" },
      { from: "", hash: "" }, { from: "", hash: "" }, { from: "", hash: "#agent=x_from" }], "read back");
  eq([failoverNote("n2", "n3"), failoverNote("n2", "n2"), failoverNote("", "n3")],
    ["reconnected through node n3; node n2 is gone", "reconnected through node n2", "reconnected through node n3"], "notes");
  let dismissed = false;
  const m = await mount(html`<${Moved} moved=${{ from: "n2", to: "n3" }} dismiss=${() => { dismissed = true; }} />`);
  eq(m.q("#moved").textContent.includes("reconnected through node n3; node n2 is gone"), true, "the note");
  m.q("#moved .dismiss").click();
  eq(dismissed, true, "dismissed");
  m.done();
});

const out = { pass: 0, fail: 0, failures: [] };
// A test that never settles fails by name instead of holding the page at
// "running…" (the Go side then sees which one).
const TEST_LIMIT_MS = 10000;
const settled = (p) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`did not settle within ${TEST_LIMIT_MS} ms`)), TEST_LIMIT_MS))]);
for (const t of tests) {
  try { await settled(Promise.resolve().then(t.fn)); out.pass++; } catch (e) { out.fail++; out.failures.push(t.name + ": " + e.message); }
}
document.getElementById("results").textContent = JSON.stringify(out);
document.body.dataset.done = "1";
