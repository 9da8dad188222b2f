// The team's state on the page (docs/protocol.md §10.4): goals, the board's
// tasks, the decisions queue, memory and the feed, as maps by id that the
// team_* events upsert, and the team commands the team view sends. The
// reducers are pure (tested in the unit page); the commands take the store,
// as orch.js's do, and answer a plain outcome the views show.

import { errText } from "./orch.js";

/** The board's columns, in order; cancelled cards are hidden unless asked. */
export const COLUMNS = ["todo", "doing", "review", "done", "blocked"];

/** At most this many feed items are kept on the page (newest). */
export const FEED_KEEP = 500;

/** emptyTeam is the team state before anything was read. */
export function emptyTeam() {
  return { goals: {}, tasks: {}, decisions: {}, memory: {}, feed: [] };
}

// newer says whether b replaces a: every event carries the whole entity as
// it is now, but a list answered before an event may arrive after it, so
// the record that says it was written later wins (a task's revision counts
// its writes; the others carry updated_at), and on a tie the one that
// arrived last.
function newer(a, b, key) {
  if (!a) return true;
  return (b[key] || 0) >= (a[key] || 0);
}

function upsert(map, list, id, key) {
  let out = map;
  for (const x of list || []) {
    if (!x || !x[id]) continue;
    if (!newer(out[x[id]], x, key)) continue;
    if (out === map) out = { ...map };
    out[x[id]] = x;
  }
  return out;
}

/** upsertGoals, upsertTasks, upsertDecisions, upsertMemory merge records
 * into the team by id, keeping the later write of each. */
export const upsertGoals = (t, l) => ({ ...t, goals: upsert(t.goals, l, "goal_id", "updated_at") });
export const upsertTasks = (t, l) => ({ ...t, tasks: upsert(t.tasks, l, "task_id", "revision") });
export const upsertDecisions = (t, l) => ({ ...t, decisions: upsert(t.decisions, l, "decision_id", "updated_at") });
export const upsertMemory = (t, l) => ({ ...t, memory: upsert(t.memory, l, "memory_id", "updated") });

/** addFeed merges feed items, by feed_id (which sorts by append time),
 * newest first, keeping FEED_KEEP. */
export function addFeed(t, items) {
  const seen = new Set(t.feed.map((x) => x.feed_id));
  const add = (items || []).filter((x) => x && x.feed_id && !seen.has(x.feed_id));
  if (add.length === 0) return t;
  const feed = [...add, ...t.feed].sort((a, b) => (a.feed_id < b.feed_id ? 1 : a.feed_id > b.feed_id ? -1 : 0)).slice(0, FEED_KEEP);
  return { ...t, feed };
}

/**
 * replaceOpenDecisions takes a team.decision.list {open_only} answer as
 * the whole open queue: a decision the page holds open that the answer
 * lacks was closed while the page was away; it is dropped from the queue
 * (its record is read again when its goal is shown).
 */
export function replaceOpenDecisions(t, list) {
  const ids = new Set((list || []).map((d) => d.decision_id));
  const decisions = {};
  for (const [id, d] of Object.entries(t.decisions)) if (d.state !== "open" || ids.has(id)) decisions[id] = d;
  return upsertDecisions({ ...t, decisions }, list);
}

/**
 * applyTeamEvent folds one team_* event into the team state; any other
 * message answers null. The events are daemon-wide and each carries the
 * whole entity (an upsert by id); team_memory_changed with deleted removes
 * the entry.
 */
export function applyTeamEvent(t, m) {
  switch (m && m.type) {
    case "team_goal_changed": return upsertGoals(t, [m.goal]);
    case "team_task_changed": return upsertTasks(t, [m.task]);
    case "team_decision_changed": return upsertDecisions(t, [m.decision]);
    case "team_feed_added": return addFeed(t, [m.item]);
    case "team_memory_changed": {
      if (!m.entry || !m.entry.memory_id) return t;
      if (m.deleted) {
        const memory = { ...t.memory };
        delete memory[m.entry.memory_id];
        return { ...t, memory };
      }
      return upsertMemory(t, [m.entry]);
    }
  }
  return null;
}

/** goalsNewestFirst lists the goals as team.goal.list does. */
export function goalsNewestFirst(t) {
  return Object.values(t.goals).sort((a, b) => (b.created_at || 0) - (a.created_at || 0) || (a.goal_id < b.goal_id ? 1 : -1));
}

/** goalTasks is a goal's tasks in creation order (the board's numbering). */
export function goalTasks(t, goalID) {
  return Object.values(t.tasks).filter((x) => x.goal_id === goalID)
    .sort((a, b) => (a.created_at || 0) - (b.created_at || 0) || (a.task_id < b.task_id ? -1 : 1));
}

/** taskNumbers numbers a goal's tasks 1, 2, … in creation order: the
 * numbers the cards and the "after" chips show. */
export function taskNumbers(tasks) {
  const n = {};
  tasks.forEach((x, i) => { n[x.task_id] = i + 1; });
  return n;
}

/**
 * boardColumns sorts a goal's tasks (creation order) into the columns:
 * each column by priority, highest first, then creation order, as the
 * daemon starts them. Cancelled cards are a column of their own, shown
 * only when asked.
 */
export function boardColumns(tasks, showCancelled) {
  const cols = {};
  for (const c of COLUMNS) cols[c] = [];
  if (showCancelled) cols.cancelled = [];
  tasks.forEach((x, i) => {
    if (cols[x.state]) cols[x.state].push({ x, i });
  });
  for (const c of Object.keys(cols)) cols[c] = cols[c].sort((a, b) => (b.x.priority || 0) - (a.x.priority || 0) || a.i - b.i).map((e) => e.x);
  return cols;
}

/** depEdges are the board's arrows: from each dependency to the task that
 * waits on it, both shown (a dependency of another goal, or a hidden
 * cancelled card, has no arrow; its chip says it). */
export function depEdges(tasks, shown) {
  const out = [];
  for (const x of tasks) {
    if (!shown.has(x.task_id)) continue;
    for (const d of x.deps || []) if (shown.has(d)) out.push({ from: d, to: x.task_id });
  }
  return out;
}

/** openDecisions is the queue: every open decision, newest last. */
export function openDecisions(t) {
  return Object.values(t.decisions).filter((d) => d.state === "open")
    .sort((a, b) => (a.created_at || 0) - (b.created_at || 0) || (a.decision_id < b.decision_id ? -1 : 1));
}

/** usd formats a cost in dollars, with cents below a dollar shown finer. */
export function usd(v) {
  const n = Number(v) || 0;
  return "$" + n.toFixed(n > 0 && n < 1 ? 4 : 2);
}

/** goalCost says what a goal spent against its limit: "$0.0120 / $5.00"
 * with a limit, "$0.0120" without; over says whether it passed it. */
export function goalCost(g) {
  const lim = g.cost_limit_usd;
  const has = typeof lim === "number";
  return { text: usd(g.cost_usd) + (has ? " / " + usd(lim) : ""), over: has && (g.cost_usd || 0) >= lim };
}

/** The labels a permission decision offers when a record carries none
 * (the daemon always sends them; docs/protocol.md §10.4). */
export const PERMISSION_OPTIONS = ["Allow once", "Always allow for this agent", "Deny"];
/** The labels of a merge decision, in order. */
export const MERGE_OPTIONS = ["Merge", "Request changes", "Reject"];

/** decisionOptions is what a decision's buttons say, in order: its own
 * options, else the kind's fixed labels; a question without options is
 * answered in words (none). */
export function decisionOptions(d) {
  if (d.options && d.options.length > 0) return d.options;
  if (d.kind === "merge") return MERGE_OPTIONS;
  if (d.kind === "permission") return PERMISSION_OPTIONS;
  return [];
}

/** prioritizeArg is the priority "prioritize" sets: one above the highest
 * of the goal's other waiting tasks, so the card starts next (the
 * daemon takes the priority as a decimal string, docs/protocol.md §10.4). */
export function prioritizeArg(task, tasks) {
  let top = task.priority || 0;
  for (const x of tasks) if (x.task_id !== task.task_id && (x.state === "todo" || x.state === "blocked")) top = Math.max(top, (x.priority || 0) + 1);
  return String(top === (task.priority || 0) ? top + 1 : top);
}

// ---- commands ----

function outcome(store, what, p, ok) {
  return p.then((d) => {
    store.note(what + ": done");
    if (ok) ok(d);
    return { ok: true, data: d };
  }, (e) => {
    store.note(what + ": " + errText(e));
    return { ok: false, text: errText(e), code: e && e.code, data: e && e.data };
  });
}

/** submitGoal sends team.goal.submit and selects the goal it made; a
 * request_id makes a resent submit answer the same goal. The model is what
 * a new lead runs on (the lead of the repository's last goal is reused). */
export function submitGoal(store, { text, cwd, limit, model }) {
  const msg = { type: "team.goal.submit", text, request_id: "web-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 8) };
  if (cwd) msg.cwd = cwd;
  // A model picked in the form (a descriptor id names its provider, as on
  // agent.create); none picked: the daemon's default.
  if (model) msg.model = model;
  if (limit !== "" && limit !== undefined && limit !== null && !Number.isNaN(Number(limit))) msg.cost_limit_usd = Number(limit);
  return outcome(store, "goal", store.conn.call(msg), (d) => {
    store.setTeam(upsertGoals(store.state.team, [d.goal]));
    store.selectGoal(d.goal.goal_id);
  });
}

/** cancelGoal sends team.goal.cancel. */
export function cancelGoal(store, goal) {
  return outcome(store, "cancel goal", store.conn.call({ type: "team.goal.cancel", goal_id: goal.goal_id }),
    (d) => store.setTeam(upsertGoals(store.state.team, [d.goal])));
}

/** taskAction sends team.task.action (cancel, retry, prioritize, reassign). */
export function taskAction(store, task, action, arg) {
  const msg = { type: "team.task.action", task_id: task.task_id, action };
  if (arg !== undefined && arg !== "") msg.arg = String(arg);
  return outcome(store, action, store.conn.call(msg), (d) => store.setTeam(upsertTasks(store.state.team, [d.task])));
}

/**
 * answerDecision sends team.decision.answer with the option's label (or,
 * for a question asked in words, the text alone). The answer is the
 * decision as carried out: a refused merge comes back open with its
 * refused_reason, which the queue shows.
 */
export function answerDecision(store, d, option, text) {
  const msg = { type: "team.decision.answer", decision_id: d.decision_id };
  if (option) msg.option = option;
  if (text) msg.text = text;
  store.answered.add(d.decision_id);
  return outcome(store, "decision", store.conn.call(msg), (r) => {
    // Refused (a merge that could not be carried out): open again, and a
    // later close by another client is news again.
    if (r.decision.state === "open") store.answered.delete(d.decision_id);
    store.setTeam(upsertDecisions(store.state.team, [r.decision]));
  }).then((o) => { if (!o.ok) store.answered.delete(d.decision_id); return o; });
}

/** putMemory writes a memory entry (team.memory.put). */
export function putMemory(store, { scope, key, title, body }) {
  const msg = { type: "team.memory.put", scope: scope || "shared", key, body };
  if (title) msg.title = title;
  return outcome(store, "memory", store.conn.call(msg), (d) => store.setTeam(upsertMemory(store.state.team, [d.entry])));
}

/** deleteMemory removes a memory entry (team.memory.delete). */
export function deleteMemory(store, entry) {
  return outcome(store, "forget", store.conn.call({ type: "team.memory.delete", memory_id: entry.memory_id }), () => {
    const memory = { ...store.state.team.memory };
    delete memory[entry.memory_id];
    store.setTeam({ ...store.state.team, memory });
  });
}

/** sendMessage sends team.message to the goal's lead (or an @name). */
export function sendMessage(store, goal, text) {
  return outcome(store, "message", store.conn.call({ type: "team.message", goal_id: goal.goal_id, to: "all", text }),
    (d) => { if (d && d.item) store.setTeam(addFeed(store.state.team, [d.item])); });
}

/** taskDiff reads the diff of a task's workspace (workspace.diff). */
export function taskDiff(store, workspaceID) {
  return store.conn.call({ type: "workspace.diff", workspace_id: workspaceID });
}
