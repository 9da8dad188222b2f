// The transcript of one agent as a pure reducer: sync and live events in,
// a new state out. No DOM, no I/O: the in-browser unit tests (test/) drive
// it directly.
//
// Every step is idempotent on the keys it writes (message id, tool call id,
// turn id, compaction index, request id), so an event seen twice, or a sync
// that already contains what live events built, never duplicates an entry
// (docs/protocol.md §6.4). The one non-idempotent step, appending a text
// delta, is guarded: deltas for a message that is already complete are
// dropped, and message_complete replaces whatever the deltas built.

/** The empty transcript. */
export function initial() {
  return {
    status: "idle", mode: "", model: "", capabilities: [], runtimeEpoch: 0,
    items: [],      // ordered entries (see the kinds below)
    pending: [],    // open permission_request / ui_request events
    resolved: [],   // the last resolutions: {request_id, kind, answer, source}
    // usage seen live: sums of the usage events, and the context size the
    // last provider call (or compaction) reported
    usage: { input: 0, output: 0, cost: 0, context_tokens: 0 },
    // annotations live events carry and sync does not (the resync merge
    // keeps them): tool call id -> {render, result render, exit code, …}
    toolExtra: {},
    blockTools: {}, // "message_id/block_index" -> tool call id
    localSeq: 0,
  };
}

// Entry kinds: message {id, role, blocks:[{type, text}], images:[Image],
// complete},
// tool {id, name, args, argsText, render, readOnly, result},
// turn {id, usage, after}, compaction {id, index, tokens_before,
// tokens_after, after}, error {id, code, message}.

function indexOf(items, id) {
  for (let i = items.length - 1; i >= 0; i--) if (items[i].id === id) return i;
  return -1;
}

function put(state, entry) {
  const items = state.items.slice();
  const i = indexOf(items, entry.id);
  if (i >= 0) items[i] = entry; else items.push(entry);
  return { ...state, items };
}

function update(state, id, fn) {
  const i = indexOf(state.items, id);
  if (i < 0) return state;
  const items = state.items.slice();
  items[i] = fn(items[i]);
  return { ...state, items };
}

function lastMessageId(items) {
  for (let i = items.length - 1; i >= 0; i--) if (items[i].kind === "message") return items[i].id;
  return "";
}

function textBlocks(content) {
  const out = [];
  for (const b of content || []) {
    if ((b.type === "text" || b.type === "thinking") && b.text) out.push({ type: b.type, text: b.text });
  }
  return out;
}

// imageBlocks are a message's images: a block with its bytes, as §11 Image
// ({type: "image", data, mime_type}, data base64), or one naming a stored
// image ({type: "image", mime_type, sha256, size}, docs/protocol.md §13
// P4) whose bytes get_image returns. A block with neither is skipped.
function imageBlocks(content) {
  const out = [];
  for (const b of content || []) {
    if (!b || b.type !== "image") continue;
    if (typeof b.data === "string" && b.data) out.push({ type: "image", data: b.data, mime_type: b.mime_type || "" });
    else if (typeof b.sha256 === "string" && b.sha256) out.push({ type: "image", sha256: b.sha256, mime_type: b.mime_type || "", size: b.size || 0 });
  }
  return out;
}

function toolEntry(state, id, fields) {
  const i = indexOf(state.items, id);
  const prev = i >= 0 ? state.items[i] : { kind: "tool", id, name: "", args: null, argsText: "", render: null, readOnly: false, result: null };
  return put(state, { ...prev, ...fields });
}

function withExtra(state, id, fields) {
  return { ...state, toolExtra: { ...state.toolExtra, [id]: { ...(state.toolExtra[id] || {}), ...fields } } };
}

// addMessage puts a whole message: its text/thinking blocks as a message
// entry (if any), its tool calls as tool entries, its tool results onto
// their tool entries.
function addMessage(state, msg, complete) {
  state = put(state, { kind: "message", id: msg.id, role: msg.role, blocks: textBlocks(msg.content), images: imageBlocks(msg.content), complete });
  for (const b of msg.content || []) {
    if (b.type === "tool_call") {
      const x = state.toolExtra[b.id] || {};
      state = toolEntry(state, b.id, { name: b.name, args: b.args || {}, render: x.render || null, readOnly: !!x.readOnly });
    } else if (b.type === "tool_result") {
      const x = state.toolExtra[b.tool_call_id] || {};
      state = toolEntry(state, b.tool_call_id, {
        result: { content: b.content || null, is_error: !!b.is_error, exit_code: x.exit_code, duration_ms: x.duration_ms, render: x.resultRender || null },
      });
    }
  }
  return state;
}

/** Applies one event of the agent's stream (sync included). */
export function reduce(state, ev) {
  switch (ev.type) {
    case "sync":
      return mergeSync(state, ev);
    case "status":
      return { ...state, status: ev.status };
    case "mode_changed":
      return { ...state, mode: ev.mode };
    case "model_changed":
      return { ...state, model: (ev.active && (ev.active.id || ev.active.model)) || state.model,
        capabilities: ev.capabilities || state.capabilities };
    case "message_delta":
      return delta(state, ev);
    case "message_complete":
      return addMessage(state, ev.message || { id: ev.message_id, role: "assistant", content: [] }, true);
    case "tool_call": {
      state = withExtra(state, ev.tool_call_id, { render: ev.render || null, readOnly: !!ev.read_only });
      return toolEntry(state, ev.tool_call_id, { name: ev.name, args: ev.args || {}, render: ev.render || null, readOnly: !!ev.read_only });
    }
    case "tool_result": {
      state = withExtra(state, ev.tool_call_id, { resultRender: ev.render || null, exit_code: ev.exit_code, duration_ms: ev.duration_ms });
      return toolEntry(state, ev.tool_call_id, {
        result: { content: ev.content || null, is_error: !!ev.is_error, exit_code: ev.exit_code, duration_ms: ev.duration_ms, render: ev.render || null },
      });
    }
    case "usage": {
      const u = state.usage;
      return { ...state, usage: { input: u.input + (ev.input || 0), output: u.output + (ev.output || 0), cost: u.cost + (ev.cost || 0),
        context_tokens: ev.context_tokens || u.context_tokens }, model: ev.model || state.model };
    }
    case "turn_end":
      return put(startQueued(state), { kind: "turn", id: "turn:" + ev.turn_id, usage: ev.usage || null, after: lastMessageId(state.items) });
    case "compaction":
      if (ev.tokens_after) state = { ...state, usage: { ...state.usage, context_tokens: ev.tokens_after } };
      return put(state, { kind: "compaction", id: "compaction:" + ev.index, index: ev.index,
        tokens_before: ev.tokens_before, tokens_after: ev.tokens_after, after: lastMessageId(state.items) });
    case "error": {
      const n = state.localSeq + 1;
      return put({ ...state, localSeq: n }, { kind: "error", id: "error:" + n, code: ev.code, message: ev.message, fatal: !!ev.fatal });
    }
    case "permission_request":
    case "ui_request":
      if (state.pending.some((r) => r.request_id === ev.request_id) || state.resolved.some((r) => r.request_id === ev.request_id)) return state;
      return { ...state, pending: [...state.pending, ev] };
    case "permission_resolved":
    case "ui_resolved":
      return resolve(state, ev);
    default:
      return state;
  }
}

function resolve(state, ev) {
  const answer = ev.type === "ui_resolved" ? ev.value : (ev.choice_id || ev.decision);
  const r = { request_id: ev.request_id, kind: ev.type === "ui_resolved" ? "ui" : "permission", answer, source: ev.source || "" };
  return { ...state, pending: state.pending.filter((p) => p.request_id !== ev.request_id),
    resolved: [...state.resolved.filter((p) => p.request_id !== ev.request_id), r].slice(-20) };
}

function delta(state, ev) {
  const id = ev.message_id;
  const i = indexOf(state.items, id);
  if (i >= 0 && state.items[i].complete) return state; // reconciled already
  if (i < 0) state = put(state, { kind: "message", id, role: "assistant", blocks: [], images: [], complete: false });
  if (ev.kind === "tool_call") {
    const key = id + "/" + ev.block_index;
    let tid = state.blockTools[key];
    if (!tid && ev.tool_call_id) {
      tid = ev.tool_call_id;
      state = { ...state, blockTools: { ...state.blockTools, [key]: tid } };
      state = toolEntry(state, tid, { name: ev.name || "" });
    }
    if (tid && ev.args_delta) state = update(state, tid, (e) => (e.args ? e : { ...e, argsText: e.argsText + ev.args_delta }));
    return state;
  }
  const text = ev.text_delta || "";
  let entry = state.items[indexOf(state.items, id)];
  const blocks = entry.blocks.slice();
  // Block indexes count tool calls too; a message entry keeps its text
  // blocks in order, so the last block of the same type continues.
  const last = blocks.length > 0 ? blocks[blocks.length - 1] : null;
  if (last && last.type === ev.kind && last.index === ev.block_index) {
    blocks[blocks.length - 1] = { ...last, text: last.text + text };
  } else {
    blocks.push({ type: ev.kind, text, index: ev.block_index });
  }
  entry = { ...entry, blocks };
  return put(state, entry);
}

/** Adds the user's own prompt locally: the runtime does not echo prompts;
 * the next sync carries it with its real id and replaces this entry.
 * queued ("steer" or "follow_up") marks a prompt sent while a turn ran:
 * the runtime accepted it but has not run it yet (see dropQueued). */
export function addLocalPrompt(state, text, queued, images) {
  const n = state.localSeq + 1;
  const e = { kind: "message", id: "local:" + n, role: "user", blocks: text ? [{ type: "text", text }] : [],
    images: (images || []).map((im) => ({ type: "image", data: im.data, mime_type: im.mime_type })), complete: true, local: true };
  if (queued) e.queued = queued;
  return put({ ...state, localSeq: n }, e);
}

/** startQueued runs at a turn's end: the turn's steers were delivered into
 * it, and the oldest queued follow-up starts the next turn. */
function startQueued(state) {
  let first = true;
  const items = state.items.map((e) => {
    if (!e.queued) return e;
    if (e.queued === "steer" || first) {
      if (e.queued !== "steer") first = false;
      const { queued, ...rest } = e;
      return rest;
    }
    return e;
  });
  return { ...state, items };
}

/**
 * dropQueued marks every prompt still queued as dropped. The runtime's
 * abort cancels the turn and drops its queued steers and follow-ups (so
 * the agent really goes idle); their prompt commands were answered
 * success (accepted/queued, §9.2) long before, so without this the page
 * kept showing a follow-up that would never run. Called when abort is
 * answered, which the runtime does before the aborted turn's turn_end.
 */
export function dropQueued(state) {
  if (!state.items.some((e) => e.queued)) return state;
  return { ...state, items: state.items.map((e) => {
    if (!e.queued) return e;
    const { queued, ...rest } = e;
    return { ...rest, dropped: true };
  }) };
}

/**
 * mergeSync rebuilds the transcript from an authoritative sync (§6.4) and
 * keeps what only live events knew: tool render descriptors, exit codes,
 * per-turn usage and compaction markers (placed after the message they
 * followed, or first when that message was compacted away). Local prompts
 * and partial messages are dropped: the window has them or they are gone.
 * Pending requests are exactly the sync's.
 */
export function mergeSync(prev, sync) {
  let state = { ...initial(), toolExtra: prev.toolExtra, localSeq: prev.localSeq, resolved: prev.resolved, usage: prev.usage,
    status: sync.status || "idle", mode: sync.mode || prev.mode, model: prev.model,
    capabilities: sync.capabilities || [], runtimeEpoch: sync.runtime_epoch || 0 };
  const win = (sync.live_window && sync.live_window.messages) || [];
  for (const m of win) state = addMessage(state, m, true);
  // Re-place the annotations.
  const notes = prev.items.filter((e) => e.kind === "turn" || e.kind === "compaction" || e.kind === "error");
  for (const n of notes) {
    if (indexOf(state.items, n.id) >= 0) continue;
    const items = state.items.slice();
    let at = n.after ? indexOf(items, n.after) : -1;
    if (at < 0 && n.after) {
      // The anchor is gone (compacted): markers go first, the rest is dropped.
      if (n.kind !== "compaction") continue;
      items.unshift(n);
    } else {
      // after the anchor and after any annotations already placed after it
      at++;
      while (at < items.length && items[at].kind !== "message") at++;
      items.splice(at, 0, n);
    }
    state = { ...state, items };
  }
  const pending = [];
  for (const r of sync.pending_requests || []) {
    if (!pending.some((p) => p.request_id === r.request_id)) pending.push(r);
  }
  return { ...state, pending, resolved: state.resolved.filter((r) => !pending.some((p) => p.request_id === r.request_id)) };
}

/** The text of a tool result's content, for plain rendering. */
export function resultText(content) {
  if (!content) return "";
  switch (content.kind) {
    case "text": return content.text || "";
    case "error": return content.message || "";
    case "json": return JSON.stringify(content.value, null, 2);
    default: return "";
  }
}

/** Whether an agent needs a person: an open request, or a waiting status. */
export function needsInput(status) {
  return status === "waiting_for_permission" || status === "waiting_for_ui";
}
