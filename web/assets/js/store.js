// The page's state and every action on it: the connection, the agent
// overview, the selected agent's transcript, jobs and workspaces. Views read
// store.state and call its methods; a change notifies the subscribers.
//
// Attachment rule: only the selected agent is attached, and interactively
// ("selected-agent-only interactive attachment"); the overview comes from
// agent.list and the sanitized agent_activity broadcast, which need no
// attachment, so no other agent ever sees this page as a responder.

import { Conn, State } from "./conn.js";
import { initial, reduce, addLocalPrompt, dropQueued, needsInput } from "./transcript.js";

/** How often the overview re-reads agent.list (attached clients, cost). */
const AGENT_POLL_MS = 3000;

export { State };

/** Run states a run never leaves (§11.2). */
const endedRun = new Set(["completed", "failed", "timed_out", "cancelled", "interrupted"]);

const requestTypes = new Set(["permission_request", "ui_request", "permission_resolved", "ui_resolved"]);

export class Store {
  constructor() {
    this.subs = new Set();
    this.state = {
      conn: State.connecting, connInfo: {},
      agents: {},        // agent_id -> AgentInfo (+ activity)
      selected: "",
      transcript: initial(),
      modes: [], models: [],
      jobs: [], workspaces: [], diff: null,
      notice: "",        // last command outcome shown in the status line
      closed: [],        // dialogs closed by another client: {request_id, text}
      attached: "",      // the agent this page is attached to now (its session_ops may be sent)
      forked: null,      // the last session_op fork's answer, so the fork list re-reads
    };
    this.conn = new Conn({
      onState: (s, info) => this.set({ conn: s, connInfo: info }),
      onEvent: (m) => this.onEvent(m),
      onOnline: () => this.onOnline(),
    });
  }

  subscribe(fn) { this.subs.add(fn); return () => this.subs.delete(fn); }

  set(patch) {
    this.state = { ...this.state, ...patch };
    for (const fn of this.subs) fn(this.state);
  }

  start() {
    const fromHash = () => {
      const m = /^#agent=([A-Za-z0-9_-]+)$/.exec(location.hash);
      return m ? m[1] : "";
    };
    this.state.selected = fromHash();
    // A link or the address bar can pick the agent: #agent=<id>.
    addEventListener("hashchange", () => { const id = fromHash(); if (id) this.select(id); });
    this.conn.start();
  }

  note(text) { this.set({ notice: text }); }

  fail(what) {
    return (e) => this.note(what + ": " + (e.code ? e.code + " " : "") + e.message + (e.data && e.data.kind ? " (" + e.data.kind + ")" : ""));
  }

  async onOnline() {
    try {
      await this.refreshAgents();
    } catch (e) { this.fail("agent.list")(e); }
    if (this.state.selected) this.attach(this.state.selected);
    this.refreshSide();
    // Attached-client counts and costs change without an event of their
    // own (docs/protocol.md): re-read agent.list while online.
    if (!this.poll) {
      this.poll = setInterval(() => {
        if (this.state.conn === State.online) this.refreshAgents(true).catch(() => {});
      }, AGENT_POLL_MS);
    }
  }

  // refreshAgents reads agent.list. A poll (quiet) takes from it only what
  // no event tells: status and mode come live from events, and the
  // registry's copy may lag the broadcast by a moment, so a poll must not
  // set an agent back to a status it has already left.
  async refreshAgents(quiet) {
    const data = await this.conn.call({ type: "agent.list" });
    const agents = {};
    for (const a of data.agents || []) {
      const had = this.state.agents[a.agent_id];
      agents[a.agent_id] = quiet && had
        ? { ...had, attached_clients: a.attached_clients, usage: a.usage, model: a.model }
        : { ...had, ...a };
    }
    this.set({ agents });
  }

  refreshSide() {
    this.conn.call({ type: "jobs.list", limit: 50 }).then((d) => this.set({ jobs: d.jobs || [] }), () => {});
    this.conn.call({ type: "workspace.list" }).then((d) => this.set({ workspaces: d.workspaces || [] }), () => {});
  }

  // refreshJobs reads the parent's jobs with subagent.status, which also
  // makes this connection one that speaks for the parent: the daemon sends
  // subagent_run_changed only to those (§10.3).
  refreshJobs(parent) {
    this.conn.call({ type: "subagent.status", parent_agent_id: parent }).then((d) => {
      const mine = d.jobs || [];
      const others = this.state.jobs.filter((j) => j.parent_agent_id !== parent);
      this.set({ jobs: [...mine, ...others].sort((a, b) => (b.created_at || 0) - (a.created_at || 0)) });
    }, () => {});
  }

  async attach(id) {
    this.set({ attached: "" }); // a new connection, or another agent: not attached until answered
    try {
      await this.conn.call({ type: "agent.attach", agent_id: id, role: "interactive" });
    } catch (e) {
      this.fail("attach")(e);
      return;
    }
    if (this.state.selected === id) this.set({ attached: id });
    this.refreshJobs(id);
    this.conn.call({ type: "list_modes", agent_id: id }).then((d) => this.set({ modes: d.modes || [] }), () => this.set({ modes: [] }));
    this.conn.call({ type: "list_models", agent_id: id }).then((d) => this.set({ models: d.models || [] }), () => this.set({ models: [] }));
  }

  select(id) {
    const prev = this.state.selected;
    if (prev === id) return;
    if (prev) this.conn.call({ type: "agent.detach", agent_id: prev }).catch(() => {});
    history.replaceState(null, "", id ? "#agent=" + id : location.pathname);
    this.set({ selected: id, transcript: initial(), modes: [], models: [], closed: [] });
    if (id && this.state.conn === State.online) this.attach(id);
  }

  onEvent(m) {
    const t = this.state;
    switch (m.type) {
      case "agent_spawned":
        this.set({ agents: { ...t.agents, [m.agent_id]: { ...t.agents[m.agent_id], ...m.info } } });
        return;
      case "agent_removed": { // agent.remove (docs/protocol.md): gone for good
        const agents = { ...t.agents };
        delete agents[m.agent_id];
        this.set({ agents });
        if (t.selected === m.agent_id) this.select(null);
        return;
      }
      case "agent_status_changed":
      case "agent_activity":
      case "agent_exited": {
        const a = t.agents[m.agent_id] || { agent_id: m.agent_id, cwd: "" };
        const next = { ...a };
        if (m.status) next.status = m.status;
        if (m.runtime_state) next.runtime_state = m.runtime_state;
        if (m.type === "agent_activity") next.activity = { phase: m.phase, tool_name: m.tool_name || "" };
        if (m.type === "agent_exited") next.exit = m.reason;
        this.set({ agents: { ...t.agents, [m.agent_id]: next } });
        return;
      }
      case "subagent_run_changed":
        this.set({ jobs: applyRunChange(t.jobs, m) });
        // An unknown run, or a run that ended (its job's state may have
        // ended with it, and no event says so): re-read the parent's jobs.
        if (endedRun.has(m.state) || !t.jobs.some((j) => j.job_id === m.job_id && (j.runs || []).some((r) => r.run_id === m.run_id))) this.refreshJobs(m.parent_agent_id);
        return;
      case "workspace_created": case "workspace_attached": case "workspace_retired": case "workspace_conflict":
        this.refreshSide();
        return;
    }
    if (!m.agent_id || !t.selected) return;
    // A delegated request keeps its child's agent_id (§6.3): it reaches
    // this page because the selected agent is its interactive ancestor.
    if (m.agent_id !== t.selected && !requestTypes.has(m.type)) return;
    let patch = {};
    if ((m.type === "permission_resolved" || m.type === "ui_resolved") && t.transcript.pending.some((p) => p.request_id === m.request_id)) {
      const who = m.source ? " from " + m.source : "";
      const ans = m.type === "ui_resolved" ? JSON.stringify(m.value) : (m.choice_id || m.decision);
      patch.closed = [...t.closed, { request_id: m.request_id, text: "Answered" + who + ": " + ans }].slice(-5);
    }
    const tr = reduce(t.transcript, m);
    patch.transcript = tr;
    if (m.agent_id === t.selected && (m.type === "status" || m.type === "sync")) {
      const a = t.agents[m.agent_id];
      if (a) patch.agents = { ...t.agents, [m.agent_id]: { ...a, status: tr.status, mode: tr.mode || a.mode } };
    }
    if (m.type === "mode_changed" && t.agents[m.agent_id]) {
      patch.agents = { ...t.agents, [m.agent_id]: { ...t.agents[m.agent_id], mode: m.mode } };
    }
    this.set(patch);
  }

  // ---- commands ----

  send(text, behavior) {
    const id = this.state.selected;
    if (!id || !text.trim()) return Promise.resolve(false);
    const msg = { type: "prompt", agent_id: id, message: text };
    const busy = this.state.transcript.status !== "idle" && this.state.transcript.status !== "error";
    if (behavior || busy) msg.streaming_behavior = behavior || "follow_up";
    return this.conn.call(msg).then(() => {
      this.set({ transcript: addLocalPrompt(this.state.transcript, text, msg.streaming_behavior) });
      return true;
    }, (e) => { this.fail("prompt")(e); return false; });
  }

  cmd(msg, what) {
    return this.conn.call(msg).then((d) => { this.note(what + ": done"); return d; }, (e) => { this.fail(what)(e); throw e; });
  }

  abort() {
    return this.cmd({ type: "abort", agent_id: this.state.selected }, "abort")
      .then(() => this.set({ transcript: dropQueued(this.state.transcript) }), () => {});
  }
  setMode(mode) { return this.cmd({ type: "set_mode", agent_id: this.state.selected, mode }, "mode").catch(() => {}); }
  setModel(model) { return this.cmd({ type: "set_model", agent_id: this.state.selected, model }, "model").catch(() => {}); }
  compact() { return this.cmd({ type: "session_op", agent_id: this.state.selected, op: "compact" }, "compact").catch(() => {}); }

  fork() {
    const items = this.state.transcript.items.filter((e) => e.kind === "message" && !e.local);
    if (items.length === 0) { this.note("fork: nothing to fork yet"); return Promise.resolve(); }
    const from = items[items.length - 1].id;
    return this.conn.call({ type: "session_op", agent_id: this.state.selected, op: "fork", args: { from_entry_id: from } })
      .then((d) => this.set({ notice: "fork: new session " + d.session_id, forked: d }), this.fail("fork"));
  }

  create(fields) {
    const msg = { type: "agent.create", cwd: fields.cwd };
    for (const k of ["name", "model", "mode"]) if (fields[k]) msg[k] = fields[k];
    // tools and skills are comma-separated lists in the form (docs/protocol.md §10.1).
    for (const k of ["tools", "skills"]) {
      const list = (fields[k] || "").split(",").map((x) => x.trim()).filter(Boolean);
      if (list.length) msg[k] = list;
    }
    return this.cmd(msg, "create").then((d) => { this.select(d.agent_id); return d; });
  }

  terminate(id) { return this.cmd({ type: "agent.terminate", agent_id: id }, "terminate").catch(() => {}); }
  kill(id) { return this.cmd({ type: "agent.kill", agent_id: id, force: true }, "kill").catch(() => {}); }

  answerPermission(req, choice) {
    const msg = { type: "permission_response", agent_id: req.agent_id || this.state.selected, request_id: req.request_id };
    if (choice.id) msg.choice_id = choice.id; else msg.decision = choice.decision;
    return this.conn.call(msg).catch(this.fail("answer"));
  }

  answerUI(req, value) {
    return this.conn.call({ type: "ui_response", agent_id: req.agent_id || this.state.selected, request_id: req.request_id, value })
      .catch(this.fail("answer"));
  }

  stopRun(job, run) {
    return this.cmd({ type: "subagent.stop", parent_agent_id: job.parent_agent_id, handle: run ? run.run_id : job.job_id }, "stop")
      .then(() => this.refreshSide(), () => {});
  }

  showDiff(ws) {
    return this.conn.call({ type: "workspace.diff", workspace_id: ws.workspace_id })
      .then((d) => this.set({ diff: d }), this.fail("diff"));
  }

  merge(ws, strategy) {
    return this.cmd({ type: "workspace.merge", workspace_id: ws.workspace_id, strategy }, "merge")
      .then(() => this.refreshSide(), () => {});
  }
}

function applyRunChange(jobs, m) {
  return jobs.map((j) => {
    if (j.job_id !== m.job_id) return j;
    const runs = (j.runs || []).map((r) => r.run_id === m.run_id
      ? { ...r, state: m.state, error: m.error || r.error, ended_at: m.ended_at || r.ended_at, alias: m.alias || r.alias } : r);
    return { ...j, runs };
  });
}

/** Agents grouped for the overview: needs input first, then working, then the rest. */
export function groupAgents(agents) {
  const list = Object.values(agents).sort((a, b) => (a.created_at || 0) - (b.created_at || 0));
  const needs = [], working = [], rest = [];
  for (const a of list) {
    if (needsInput(a.status)) needs.push(a);
    else if (a.status === "streaming" || a.status === "compacting") working.push(a);
    else rest.push(a);
  }
  return { needs, working, rest };
}
