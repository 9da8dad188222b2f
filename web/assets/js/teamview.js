// The team view (docs/protocol.md §10.4): a goal input, the goals with
// their progress and cost, the selected goal's board in columns with its
// dependencies drawn as arrows, the decisions queue (a merge decision with
// its task's diff), the feed and the team's memory. Everything follows the
// team_* events live (team.js folds them in); the navigation's badge counts
// the open decisions on every view.

import { useEffect, useLayoutEffect, useRef, useState } from "../vendor/hooks.mjs";
import { html } from "./html.js";
import { agentLabel, ModelChoice } from "./overview.js";
import { Diff } from "./side.js";
import { errText } from "./orch.js";
import {
  COLUMNS, goalsNewestFirst, goalTasks, taskNumbers, boardColumns, depEdges, openDecisions, goalCost,
  decisionOptions, prioritizeArg, submitGoal, cancelGoal, taskAction, answerDecision, putMemory, deleteMemory,
  sendMessage, taskDiff,
} from "./team.js";

const openGoal = new Set(["planning", "active"]);

function ago(ms) {
  if (!ms) return "";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 60 ? s + "s ago" : s < 3600 ? Math.round(s / 60) + "m ago" : Math.round(s / 3600) + "h ago";
}

function firstLine(text, n = 80) {
  const l = String(text || "").split("\n")[0];
  return l.length > n ? l.slice(0, n - 1) + "…" : l;
}

function agentName(s, id) {
  if (!id) return "";
  return agentLabel(s.agents[id]) || id;
}

/** The views' switch in the header, with the count of decisions waiting on
 * a person, shown on every view. */
export function ViewNav({ s, store }) {
  const n = openDecisions(s.team).length;
  const tab = (view, label, extra) => html`<button id=${"view-" + view} class=${"tab" + (s.view === view ? " cur" : "")}
      aria-current=${s.view === view ? "page" : undefined} onClick=${() => store.setView(view)}>${label}${extra}</button>`;
  return html`<nav class="views" aria-label="Views">
    ${tab("agents", "Agents", null)}
    ${tab("team", "Team", n > 0 ? html` <span id="team-badge" class="badge ask" title="decisions waiting on you" aria-label=${n + " decisions waiting"}>${n}</span>` : null)}
  </nav>`;
}

/** defaultCwd is where a new goal works unless the person says otherwise:
 * the selected goal's repository, else the newest goal's, else the
 * selected agent's directory; empty means the daemon's team.repo. */
export function defaultCwd(s) {
  const g = s.team.goals[s.teamGoal] || goalsNewestFirst(s.team)[0];
  if (g && g.cwd) return g.cwd;
  const a = s.agents[s.selected];
  return (a && a.cwd) || "";
}

/** GoalForm submits a goal (team.goal.submit). */
export function GoalForm({ s, store }) {
  const [text, setText] = useState("");
  const [cwd, setCwd] = useState(null); // null: follow defaultCwd
  const [limit, setLimit] = useState("");
  const [model, setModel] = useState(""); // "": the daemon's default for a new lead
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const where = cwd === null ? defaultCwd(s) : cwd;
  const submit = (e) => {
    if (e) e.preventDefault();
    if (!text.trim() || busy) return;
    setBusy(true);
    submitGoal(store, { text, cwd: where.trim(), limit: limit.trim(), model }).then((r) => {
      setBusy(false);
      if (r.ok) { setText(""); setErr(""); } else setErr(r.text);
    });
  };
  return html`<form id="team-goal-form" class="team-form" onSubmit=${submit}>
    <label for="team-goal-text">Goal</label>
    <textarea id="team-goal-text" rows="4" placeholder="What should the team build? (Ctrl+Enter submits)" value=${text}
      onInput=${(e) => setText(e.target.value)} onKeyDown=${(e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submit(e); }}></textarea>
    <label for="team-goal-cwd">Repository (main checkout)</label>
    <input id="team-goal-cwd" placeholder="the daemon's team.repo" value=${where} onInput=${(e) => setCwd(e.target.value)} />
    <label for="team-goal-limit">Cost limit, USD (optional)</label>
    <input id="team-goal-limit" type="number" min="0" step="0.01" placeholder="no limit" value=${limit} onInput=${(e) => setLimit(e.target.value)} />
    <div class="team-model" title="what a new lead runs on (a repository's lead, once started, is reused)"><${ModelChoice} id="team-goal-model" catalog=${s.catalog} value=${model} onChange=${setModel} /></div>
    <button id="team-goal-go" type="submit" class="primary" disabled=${busy || !text.trim()}>Submit goal</button>
    ${err ? html`<p class="err" id="team-goal-err">${err}</p>` : null}
  </form>`;
}

function Goals({ s, store }) {
  const goals = goalsNewestFirst(s.team);
  return html`<section id="team-goals" aria-label="Goals"><h2>Goals <span class="count">${goals.length}</span></h2>
    ${goals.length === 0 ? html`<p class="empty">No goals yet.</p>` : null}
    <ul class="goals">${goals.map((g) => {
      const c = goalCost(g);
      const sel = g.goal_id === s.teamGoal;
      return html`<li key=${g.goal_id} class=${"goal gs-" + g.status + (sel ? " sel" : "")} data-goal=${g.goal_id} data-status=${g.status}>
        <button class="pick" aria-current=${sel ? "true" : undefined} onClick=${() => store.selectGoal(g.goal_id)}>
          <span class="gtext" title=${g.text}>${firstLine(g.text)}</span>
          <span class="gmeta"><span class="state">${g.status}</span>
            <meter min="0" max="1" value=${g.progress || 0} aria-label="progress"></meter> <span class="progress">${Math.round((g.progress || 0) * 100)}%</span>${" · "}<span class=${"cost" + (c.over ? " over" : "")} title="spent / limit">${c.text}</span></span>
        </button>
      </li>`;
    })}</ul></section>`;
}

// The arrows' geometry: from the dependency's card to the card waiting on
// it, between columns edge to edge, within a column around the cards'
// right edge. Rectangles are relative to the board.
function arrowPath(a, b) {
  if (b.left >= a.right - 1) {
    const x1 = a.right, y1 = a.top + a.height / 2, x2 = b.left, y2 = b.top + b.height / 2, dx = Math.max(20, (x2 - x1) / 2);
    return `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`;
  }
  if (b.right <= a.left + 1) {
    const x1 = a.left, y1 = a.top + a.height / 2, x2 = b.right, y2 = b.top + b.height / 2, dx = Math.max(20, (x1 - x2) / 2);
    return `M${x1},${y1} C${x1 - dx},${y1} ${x2 + dx},${y2} ${x2},${y2}`;
  }
  const x1 = a.right, y1 = a.top + a.height / 2, x2 = b.right, y2 = b.top + b.height / 2;
  return `M${x1},${y1} C${x1 + 28},${y1} ${x2 + 28},${y2} ${x2},${y2}`;
}

// The agents a task may be given to (reassign): every agent the page
// knows, by label.
function agentChoices(s) {
  return Object.values(s.agents).sort((a, b) => agentLabel(a).localeCompare(agentLabel(b)));
}

function Card({ x, n, nums, s, store, tasks }) {
  const [out, setOut] = useState("");
  const [to, setTo] = useState(null); // the reassign picker's agent id; null: closed
  const act = (action, arg) => taskAction(store, x, action, arg).then((r) => { setOut(r.ok ? "" : r.text); if (r.ok) setTo(null); });
  const waiting = x.state === "todo" || x.state === "blocked" || x.state === "cancelled";
  const deps = x.deps || [];
  const ci = (x.ci && x.ci.status) || "unknown";
  return html`<li class=${"card ts-" + x.state} data-task=${x.task_id} data-state=${x.state} data-num=${n}>
    <div class="card-head"><span class="num">#${n}</span> <b class="ctitle" title=${x.description || x.title}>${x.title}</b>
      ${x.priority ? html` <span class="prio" title="priority">p${x.priority}</span>` : null}</div>
    <div class="card-meta">
      ${x.assignee ? html`<a class="assignee" href=${"#agent=" + x.assignee} title=${x.assignee}>${agentName(s, x.assignee)}</a>` : html`<span class="assignee none">unassigned</span>`}
      ${x.branch ? html` · <code class="branch" title=${x.branch}>${x.branch}</code>` : null}
      ${x.diff ? html` · <span class="dstat" title="files, additions, deletions">${x.diff.files} files <span class="add">+${x.diff.additions}</span> <span class="del">−${x.diff.deletions}</span></span>` : null}
      ${" "}<span class=${"ci ci-" + ci} data-ci=${ci} title=${(x.ci && x.ci.summary) || "CI: " + ci}>CI ${ci}</span>
    </div>
    ${deps.length ? html`<div class="after" aria-label="Depends on">after: ${deps.map((d, i) => html`${i ? ", " : ""}<span class="chip" data-dep=${d}>${nums[d] ? "#" + nums[d] : d}</span>`)}</div>` : null}
    ${x.blocked_reason && (x.state === "blocked" || x.state === "cancelled") ? html`<div class="why">${x.blocked_reason}</div>` : null}
    ${x.summary ? html`<div class="summary" title=${x.summary}>${x.summary}</div>` : null}
    <div class="card-acts">
      ${x.state !== "done" && x.state !== "cancelled" ? html`<button class="t-cancel" aria-label=${"Cancel task #" + n} onClick=${() => act("cancel")}>Cancel</button>` : null}
      ${x.state === "blocked" || x.state === "cancelled" ? html`<button class="t-retry" aria-label=${"Retry task #" + n} onClick=${() => act("retry")}>Retry</button>` : null}
      ${x.state === "todo" || x.state === "blocked" ? html`<button class="t-prio" aria-label=${"Prioritize task #" + n} title="start it before the others" onClick=${() => act("prioritize", prioritizeArg(x, tasks))}>Prioritize</button>` : null}
      ${waiting && to === null ? html`<button class="t-reassign" aria-label=${"Reassign task #" + n} title="the agent that works on it" onClick=${() => setTo(x.assignee || "")}>Reassign…</button>` : null}
    </div>
    ${waiting && to !== null ? html`<form class="reassign" onSubmit=${(e) => { e.preventDefault(); if (to) act("reassign", to); }}>
      <select aria-label=${"Agent for task #" + n} value=${to} onChange=${(e) => setTo(e.target.value)}>
        <option value="">agent…</option>
        ${agentChoices(s).map((a) => html`<option value=${a.agent_id}>${agentLabel(a)}</option>`)}</select>
      <button type="submit" disabled=${!to}>Reassign</button> <button type="button" onClick=${() => setTo(null)}>Cancel</button></form>` : null}
    ${out ? html`<div class="card-out err">${out}</div>` : null}
  </li>`;
}

/** Board is a goal's tasks in columns, with the dependency arrows. */
export function Board({ s, store, goal }) {
  const [showCancelled, setShow] = useState(false);
  const [lines, setLines] = useState({ w: 0, h: 0, paths: [] });
  const ref = useRef(null);
  const tasks = goalTasks(s.team, goal.goal_id);
  const nums = taskNumbers(tasks);
  const cols = boardColumns(tasks, showCancelled);
  const shown = new Set(Object.values(cols).flat().map((x) => x.task_id));
  const edges = depEdges(tasks, shown);
  const cancelled = tasks.filter((x) => x.state === "cancelled").length;
  const layoutKey = JSON.stringify(edges) + "|" + Object.entries(cols).map(([k, l]) => k + ":" + l.map((x) => x.task_id + "." + x.revision).join(",")).join(";");
  useLayoutEffect(() => {
    const box = ref.current;
    if (!box) return undefined;
    const measure = () => {
      const b = box.getBoundingClientRect();
      const rect = (id) => {
        const el = box.querySelector(`[data-task="${id}"]`);
        if (!el) return null;
        const r = el.getBoundingClientRect();
        return { left: r.left - b.left, right: r.right - b.left, top: r.top - b.top, height: r.height };
      };
      const paths = [];
      for (const e of edges) {
        const a = rect(e.from), c = rect(e.to);
        if (a && c) paths.push({ ...e, d: arrowPath(a, c) });
      }
      const next = { w: Math.ceil(b.width), h: Math.ceil(b.height), paths };
      setLines((prev) => (JSON.stringify(prev) === JSON.stringify(next) ? prev : next));
    };
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(box);
    return () => ro.disconnect();
  }, [layoutKey]);
  const names = [...COLUMNS, ...(showCancelled ? ["cancelled"] : [])];
  return html`<section id="team-board" aria-label="Board" data-goal=${goal.goal_id}>
    <div class="board-head">
      <h2>Board <span class="count">${tasks.length}</span></h2>
      <span class="state">${goal.status}</span>
      <span class="progress" title="tasks done">${Math.round((goal.progress || 0) * 100)}% done</span>
      <span id="team-goal-cost" class=${"cost" + (goalCost(goal).over ? " over" : "")} title="spent / limit">${goalCost(goal).text}</span>
      ${goal.lead_agent_id ? html`<a class="lead" href=${"#agent=" + goal.lead_agent_id}>lead: ${agentName(s, goal.lead_agent_id)}</a>` : null}
      <label class="toggle"><input type="checkbox" id="team-show-cancelled" checked=${showCancelled} onChange=${(e) => setShow(e.target.checked)} /> Show cancelled (${cancelled})</label>
      ${openGoal.has(goal.status) ? html`<button id="team-goal-cancel" class="danger" onClick=${() => cancelGoal(store, goal)}>Cancel goal</button>` : null}
    </div>
    <p class="gtext-full">${goal.text}</p>
    ${tasks.length === 0 ? html`<p class="empty">${goal.status === "planning" ? "The lead is planning…" : "No tasks."}</p>` : null}
    <div class=${"board-cols n" + names.length} ref=${ref}>
      <svg class="deps" width=${lines.w} height=${lines.h} aria-hidden="true">
        <defs><marker id="team-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z"></path></marker></defs>
        ${lines.paths.map((p) => html`<path key=${p.from + ">" + p.to} class="dep" data-from=${p.from} data-to=${p.to} d=${p.d} marker-end="url(#team-arrow)"></path>`)}
      </svg>
      ${names.map((c) => html`<section key=${c} class=${"col col-" + c} data-col=${c} aria-label=${c}>
        <h3>${c} <span class="count">${cols[c].length}</span></h3>
        <ul class="cards">${cols[c].map((x) => html`<${Card} key=${x.task_id} x=${x} n=${nums[x.task_id]} nums=${nums} s=${s} store=${store} tasks=${tasks} />`)}</ul>
      </section>`)}
    </div>
  </section>`;
}

function DecisionDiff({ s, store, d }) {
  const task = d.task_id ? s.team.tasks[d.task_id] : null;
  const ws = task && task.workspace_id;
  const [diff, setDiff] = useState(null);
  const [err, setErr] = useState("");
  useEffect(() => {
    if (!ws) {
      // A decision of a goal whose board this page has not read: read it.
      if (d.task_id && !task) store.loadGoal(d.goal_id);
      return undefined;
    }
    let live = true;
    setDiff(null); setErr("");
    taskDiff(store, ws).then((x) => { if (live) setDiff(x); }, (e) => { if (live) setErr(errText(e)); });
    return () => { live = false; };
  }, [d.decision_id, ws]);
  if (err) return html`<p class="err diff-err">diff: ${err}</p>`;
  if (!diff) return html`<p class="meta">${ws ? "Reading the diff…" : "No workspace for this task."}</p>`;
  return html`<${Diff} d=${diff} id=${"team-diff-" + d.decision_id} className="wsdiff inline" />`;
}

function Decision({ s, store, d }) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [out, setOut] = useState("");
  const opts = decisionOptions(d);
  const goal = s.team.goals[d.goal_id];
  const task = d.task_id ? s.team.tasks[d.task_id] : null;
  const answer = (option) => {
    setBusy(true);
    answerDecision(store, d, option, text.trim()).then((r) => {
      setBusy(false);
      setOut(r.ok ? "" : r.text);
      if (r.ok) setText("");
    });
  };
  const words = opts.length === 0;
  const box = d.kind === "merge" ? "Feedback (sent with Request changes)" : d.kind === "permission" ? "Reason (optional, sent with the answer)" : words ? "Your answer" : "A note (optional)";
  return html`<li class=${"decision k-" + d.kind} data-decision=${d.decision_id} data-kind=${d.kind} data-task=${d.task_id || ""} role="group" aria-label=${d.kind + " decision"}>
    <div class="dhead"><span class=${"kind k-" + d.kind}>${d.kind}</span>
      ${goal ? html` <a class="dgoal" href=${"#team=" + goal.goal_id} title=${goal.text}>${firstLine(goal.text, 40)}</a>` : null}
      ${task ? html` · <span class="dtask">${task.title}</span>` : null}
      ${d.agent_id ? html` · <a href=${"#agent=" + d.agent_id}>${agentName(s, d.agent_id)}</a>` : null}
      ${d.tool ? html` · <code>${d.tool}</code>` : null}
      <span class="when">${ago(d.created_at)}</span></div>
    <p class="question">${d.question}</p>
    ${d.context ? html`<pre class="context">${d.context}</pre>` : null}
    ${d.refused_reason ? html`<p class="refused" role="alert">Refused: ${d.refused_reason}</p>` : null}
    ${d.kind === "merge" ? html`<${DecisionDiff} s=${s} store=${store} d=${d} />` : null}
    <textarea class="dtext" rows=${words ? 3 : 2} aria-label=${box} placeholder=${box} value=${text} disabled=${busy} onInput=${(e) => setText(e.target.value)}></textarea>
    <div class="choices">${words
      ? html`<button class="option primary" data-option="" disabled=${busy || !text.trim()} onClick=${() => answer("")}>Answer</button>`
      : opts.map((o, i) => html`<button class=${"option" + (i === 0 ? " primary" : "") + (/^(Deny|Reject)$/.test(o) ? " danger" : "")} data-option=${o} disabled=${busy} onClick=${() => answer(o)}>${o}</button>`)}</div>
    ${out ? html`<p class="err dout">${out}</p>` : null}
  </li>`;
}

function NotifyButton() {
  const N = globalThis.Notification;
  const [perm, setPerm] = useState(N ? N.permission : "unsupported");
  if (!N) return null;
  if (perm === "granted") return html`<span id="team-notify-state" class="meta">notifications on</span>`;
  if (perm === "denied") return html`<span id="team-notify-state" class="meta">notifications blocked by the browser</span>`;
  return html`<button id="team-notify" title="Notify me when a decision waits" onClick=${() => N.requestPermission().then((p) => setPerm(p), () => {})}>Notify me</button>`;
}

/** Decisions is the queue: every open decision, newest last. */
export function Decisions({ s, store }) {
  const open = openDecisions(s.team);
  return html`<section id="team-decisions" aria-label="Decisions">
    <h2>Decisions <span class="count">${open.length}</span> <${NotifyButton} /></h2>
    ${open.length === 0 ? html`<p class="empty">Nothing waits on you.</p>` : null}
    <ol class="decisions">${open.map((d) => html`<${Decision} key=${d.decision_id} s=${s} store=${store} d=${d} />`)}</ol>
    ${s.teamClosed.map((c) => html`<div class="closed-note" data-closed-decision=${c.decision_id}>${c.text}</div>`)}
  </section>`;
}

function Feed({ s, store, goal }) {
  const [text, setText] = useState("");
  const items = s.team.feed.filter((x) => !goal || !x.goal_id || x.goal_id === goal.goal_id).slice(0, 100);
  const send = (e) => {
    e.preventDefault();
    if (!goal || !text.trim()) return;
    sendMessage(store, goal, text).then((r) => { if (r.ok) setText(""); });
  };
  return html`<section id="team-feed" aria-label="Feed"><h2>Feed <span class="count">${items.length}</span></h2>
    ${goal ? html`<form class="feed-send" onSubmit=${send}><input id="team-message" aria-label="Message the team" placeholder="Message the lead (@name for an agent)"
      value=${text} onInput=${(e) => setText(e.target.value)} /><button type="submit" disabled=${!text.trim()}>Send</button></form>` : null}
    ${items.length === 0 ? html`<p class="empty">Nothing happened yet.</p>` : null}
    <ol class="feed">${items.map((x) => html`<li key=${x.feed_id} class=${"feed-item fk-" + x.kind} data-feed=${x.feed_id} data-kind=${x.kind}>
      <time datetime=${new Date(x.at).toISOString()} title=${new Date(x.at).toLocaleString()}>${ago(x.at)}</time>
      <span class="fkind">${x.kind}</span>${x.agent_id ? html` <a class="fagent" href=${"#agent=" + x.agent_id}>${agentName(s, x.agent_id)}</a>` : null}
      <span class="ftext">${x.text}</span></li>`)}</ol>
    ${s.feedBefore ? html`<button id="team-feed-older" onClick=${() => store.olderFeed()}>Older</button>` : null}</section>`;
}

const blankMem = { scope: "shared", key: "", title: "", body: "" };

/** Memory lists the team's notes and writes them (add, edit, delete). */
export function Memory({ s, store }) {
  const [f, setF] = useState(blankMem);
  const [editing, setEditing] = useState("");
  const [open, setOpen] = useState(false); // the form shows on "Add a note…" or Edit
  const [err, setErr] = useState("");
  const entries = Object.values(s.team.memory).sort((a, b) => (a.scope + "\u0000" + a.key < b.scope + "\u0000" + b.key ? -1 : 1));
  const field = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const save = (e) => {
    e.preventDefault();
    putMemory(store, f).then((r) => { if (r.ok) { setF(blankMem); setEditing(""); setErr(""); setOpen(false); } else setErr(r.text); });
  };
  const edit = (m) => { setEditing(m.memory_id); setOpen(true); setF({ scope: m.scope, key: m.key, title: m.title || "", body: m.body || "" }); };
  const close = () => { setEditing(""); setF(blankMem); setErr(""); setOpen(false); };
  return html`<section id="team-memory" aria-label="Memory"><h2>Memory <span class="count">${entries.length}</span></h2>
    ${entries.length === 0 ? html`<p class="empty">No notes.</p>` : null}
    <ul class="mems">${entries.map((m) => html`<li key=${m.memory_id} class="mem" data-memory=${m.memory_id} data-key=${m.key} data-scope=${m.scope}>
      <div><b class="mtitle">${m.title || m.key}</b> <span class="meta">${m.scope === "shared" ? "shared" : agentName(s, m.scope)} · ${m.key}${m.author ? " · by " + agentName(s, m.author) : ""}</span></div>
      <pre class="mbody">${m.body}</pre>
      <div class="wbtns"><button class="m-edit" aria-label=${"Edit " + m.key} onClick=${() => edit(m)}>Edit</button>
        <button class="m-del danger" aria-label=${"Delete " + m.key} onClick=${() => deleteMemory(store, m)}>Delete</button></div>
    </li>`)}</ul>
    ${open ? null : html`<button id="team-mem-new" onClick=${() => setOpen(true)}>Add a note…</button>`}
    ${open ? html`<form id="team-mem-form" class="team-form" onSubmit=${save}>
      <label for="team-mem-scope">Scope</label><input id="team-mem-scope" value=${f.scope} onInput=${field("scope")} placeholder="shared, or an agent id" required />
      <label for="team-mem-key">Key</label><input id="team-mem-key" value=${f.key} onInput=${field("key")} required disabled=${!!editing} />
      <label for="team-mem-title">Title</label><input id="team-mem-title" value=${f.title} onInput=${field("title")} />
      <label for="team-mem-body">Note (markdown)</label><textarea id="team-mem-body" rows="3" value=${f.body} onInput=${field("body")} required></textarea>
      <div class="wbtns"><button id="team-mem-save" type="submit">${editing ? "Save note" : "Add note"}</button>
        <button type="button" id="team-mem-cancel" onClick=${close}>Cancel</button></div>
      ${err ? html`<p class="err">${err}</p>` : null}
    </form>` : null}</section>`;
}

/** TeamView is the whole team view. */
export function TeamView({ s, store }) {
  if (s.teamAvail === false) {
    return html`<main class="teamview" id="team-view"><p class="empty" id="team-unavailable">This daemon does not run teams (it does not answer team.* commands, docs/protocol.md §10.4).</p></main>`;
  }
  const goal = s.team.goals[s.teamGoal];
  return html`<div class="teamview" id="team-view">
    <div class="team-left" aria-label="Goals and memory"><${GoalForm} s=${s} store=${store} /><${Goals} s=${s} store=${store} /><${Memory} s=${s} store=${store} /></div>
    <main class="team-center">${goal ? html`<${Board} s=${s} store=${store} goal=${goal} />` : html`<p class="empty">Submit a goal, or pick one.</p>`}
      <${Feed} s=${s} store=${store} goal=${goal} /></main>
    <aside class="team-right"><${Decisions} s=${s} store=${store} /></aside>
  </div>`;
}
