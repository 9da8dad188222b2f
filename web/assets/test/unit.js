// Unit tests of the page's pure modules, run in headless Chromium by
// web/browser_test.go (TestPureModules). Results land in #results as JSON.

import { jobCardData } from "../js/jobcard.js";
import { initial, reduce, mergeSync, addLocalPrompt, dropQueued, resultText } from "../js/transcript.js";
import { backoffDelay } from "../js/backoff.js";
import { tokenize, langOf } from "../js/syntax.js";

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

const out = { pass: 0, fail: 0, failures: [] };
for (const t of tests) {
  try { t.fn(); out.pass++; } catch (e) { out.fail++; out.failures.push(t.name + ": " + e.message); }
}
document.getElementById("results").textContent = JSON.stringify(out);
document.body.dataset.done = "1";
