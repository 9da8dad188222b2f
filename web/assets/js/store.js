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
import { wireImage, setImageSource } from "./images.js";
import { unreachableNode, failoverTarget, failoverHash, splitFailover } from "./cluster.js";
import { emptyTeam, applyTeamEvent, upsertGoals, upsertTasks, upsertDecisions, addFeed, replaceOpenDecisions, goalsNewestFirst } from "./team.js";

/** How often the overview re-reads agent.list (attached clients, cost). */
const AGENT_POLL_MS = 3000;

/** How often the header re-reads cluster.status (health, load). */
const CLUSTER_POLL_MS = 5000;

/** The overview shows the live agents and those created within this long,
 * not every agent the daemon ever held (docs/protocol.md §10.1, filtered
 * agent.list). */
const RECENT_MS = 7 * 24 * 3600 * 1000;

/** The overview reads each filtered list in pages of this many, and at most
 * OVERVIEW_PAGES of them (docs/protocol.md §13, paged lists). */
const OVERVIEW_PAGE = 200;
const OVERVIEW_PAGES = 5;

export { State };

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
      // the daemon's model catalog (models.list, docs/protocol.md §13):
      // {models: ModelDescriptor[], default}, for the create forms; null
      // until read, or when the daemon has no such command
      catalog: null,
      // the catalogs' runtime: which runtime_epoch of the selected agent
      // modes, models and reasoning levels were read from (§9.1)
      catalogEpoch: null,
      activeModel: null, // list_models active / model_changed active
      reasoning: null,   // list_reasoning_levels {model, levels, active}
      jobs: [], workspaces: [], diff: null,
      notice: "",        // last command outcome shown in the status line
      closed: [],        // dialogs closed by another client: {request_id, text}
      attached: "",      // the agent this page is attached to now (its session_ops may be sent)
      forked: null,      // the last session_op fork's answer, so the fork list re-reads
      view: "agents",    // the main view: "agents" or "team" (docs/protocol.md §10.4)
      team: emptyTeam(), // goals, tasks, decisions, memory, feed by id (team.js)
      teamGoal: "",      // the goal whose board the team view shows
      teamAvail: null,   // whether the daemon answers team.*: null until asked
      teamClosed: [],    // decisions another client answered first: {decision_id, text}
      feedBefore: "",    // team.feed next_before: older items remain
      cluster: null,     // the last cluster.status answer; null until read, or from a daemon without it
      sideMissing: {},   // {jobs, workspaces}: the nodes the last lists left out (unavailable_nodes)
      elsewhere: {},     // agent_id -> {node, why}: its attach could not reach its node (NODE_UNAVAILABLE)
      movedFrom: "",     // the lost node whose page sent this one here (#…&from=<node>)
      moved: null,       // {from, to}: shown once this page is online after a failover
    };
    // the decisions this page answered (a close it caused is no news)
    this.answered = new Set();
    // agent_id -> how many model_changed events this page has applied
    // (refreshAgents: an agent.list read before one is older than it)
    this.modelSeq = {};
    this.conn = new Conn({
      onState: (s, info) => this.set({ conn: s, connInfo: info }),
      onEvent: (m) => this.onEvent(m),
      onOnline: () => this.onOnline(),
      onUnreachable: () => this.failover(),
    });
    setImageSource((sha) => this.image(sha));
  }

  // image fetches a stored image of the selected agent by digest
  // (get_image, docs/protocol.md §13 P4).
  image(sha256) {
    return this.conn.call({ type: "get_image", agent_id: this.state.selected, sha256 });
  }

  subscribe(fn) { this.subs.add(fn); return () => this.subs.delete(fn); }

  set(patch) {
    this.state = { ...this.state, ...patch };
    for (const fn of this.subs) fn(this.state);
  }

  start() {
    // A page a lost node's page sent here (failover below): note where
    // from, and keep the rest of the address.
    const moved = splitFailover(location.hash);
    if (moved.from) {
      this.state.movedFrom = moved.from;
      history.replaceState(null, "", moved.hash || location.pathname);
    }
    const fromHash = () => {
      const m = /^#agent=([A-Za-z0-9_-]+)$/.exec(location.hash);
      return m ? m[1] : "";
    };
    const teamHash = () => {
      const m = /^#team(?:=([A-Za-z0-9_-]+))?$/.exec(location.hash);
      return m ? { goal: m[1] || "" } : null;
    };
    this.state.selected = fromHash();
    const t0 = teamHash();
    if (t0) { this.state.view = "team"; this.state.teamGoal = t0.goal; }
    // A link or the address bar can pick the agent (#agent=<id>) or the
    // team view and a goal (#team, #team=<goal_id>).
    addEventListener("hashchange", () => {
      const id = fromHash();
      if (id) { this.setView("agents"); this.select(id); return; }
      const t = teamHash();
      if (t) { this.setView("team"); if (t.goal) this.selectGoal(t.goal); }
    });
    this.conn.start();
  }

  // failover leaves for another node's dashboard when the page's own
  // node does not answer a reconnect and the page knows a cluster: the
  // next node of its last cluster.status (failoverTarget), with the agent
  // or goal it showed and the lost node in the address. That page
  // authenticates with its own session (each node keeps its own), attaches
  // the same agent (its sync is the resync, docs/protocol.md §6.4) and
  // says "reconnected through node n3; node n2 is gone", the words of
  // shardctl attach (docs/protocol.md §13 "A client's node dies"). false
  // when there is nowhere to go: the page keeps reconnecting to its own.
  failover() {
    const st = this.state.cluster;
    const to = failoverTarget(st, location.origin);
    if (!to) return false;
    this.set({ conn: State.moving, connInfo: { from: st.node, to: to.node } });
    location.assign(to.url + failoverHash(this.state, st.node));
    return true;
  }

  // setView switches the main view; the address says which.
  setView(view) {
    if (this.state.view === view) return;
    this.set({ view });
    if (view === "team") history.replaceState(null, "", "#team" + (this.state.teamGoal ? "=" + this.state.teamGoal : ""));
    else history.replaceState(null, "", this.state.selected ? "#agent=" + this.state.selected : location.pathname);
  }

  setTeam(team) { this.set({ team }); }

  // selectGoal shows a goal's board: its tasks and decisions are read with
  // team.goal.show, then follow from the events.
  selectGoal(id) {
    if (this.state.teamGoal !== id) {
      this.set({ teamGoal: id });
      if (this.state.view === "team") history.replaceState(null, "", "#team" + (id ? "=" + id : ""));
    }
    if (id && this.state.conn === State.online) this.loadGoal(id);
  }

  loadGoal(id) {
    return this.conn.call({ type: "team.goal.show", goal_id: id }).then((d) => {
      let t = upsertGoals(this.state.team, [d.goal]);
      t = upsertTasks(t, d.tasks);
      t = upsertDecisions(t, d.decisions);
      this.setTeam(t);
    }, this.fail("team.goal.show"));
  }

  // refreshTeam reads the team on every connection: the goals, the open
  // decisions of every goal (the queue and the badge every view shows),
  // memory and the newest feed; then the selected goal's board (the
  // newest goal when none is). A daemon without team.* leaves the view
  // saying so.
  async refreshTeam() {
    let goals;
    try {
      goals = await this.conn.call({ type: "team.goal.list" });
    } catch (e) {
      if (e && e.code) this.set({ teamAvail: false });
      return;
    }
    let t = upsertGoals(this.state.team, goals.goals);
    this.set({ teamAvail: true, team: t });
    const [dec, mem, feed] = await Promise.allSettled([
      this.conn.call({ type: "team.decision.list", open_only: true }),
      this.conn.call({ type: "team.memory.list" }),
      this.conn.call({ type: "team.feed", limit: 100 }),
    ]);
    t = this.state.team;
    if (dec.status === "fulfilled") t = replaceOpenDecisions(t, dec.value.decisions);
    // The memory list is the whole memory: entries deleted while away go.
    if (mem.status === "fulfilled") t = { ...t, memory: Object.fromEntries((mem.value.entries || []).map((e) => [e.memory_id, e])) };
    if (feed.status === "fulfilled") t = addFeed(t, feed.value.items);
    this.set({ team: t, feedBefore: feed.status === "fulfilled" ? feed.value.next_before || "" : "" });
    const g = this.state.teamGoal || (goalsNewestFirst(t)[0] || {}).goal_id;
    if (g) this.selectGoal(g);
  }

  // olderFeed reads the page of the feed before the oldest item read.
  olderFeed() {
    const before = this.state.feedBefore;
    if (!before) return Promise.resolve();
    return this.conn.call({ type: "team.feed", before, limit: 100 }).then((d) => {
      this.set({ team: addFeed(this.state.team, d.items), feedBefore: d.next_before || "" });
    }, this.fail("team.feed"));
  }

  // onTeamEvent folds a team_* event in. A decision that opens is news for
  // a person: the browser notifies when the person allowed it (the page
  // asks from a button, never by itself). A decision another client closed
  // leaves a note where it was.
  onTeamEvent(m, next) {
    const before = this.state.team;
    const patch = { team: next };
    if (m.type === "team_decision_changed" && m.decision) {
      const d = m.decision, was = before.decisions[d.decision_id];
      if (d.state === "open" && (!was || was.state !== "open")) notifyDecision(d, () => this.setView("team"));
      if (d.state !== "open" && was && was.state === "open" && !this.answered.has(d.decision_id)) {
        const a = d.answer || {};
        // by is "user", a transport, or the id of the agent that answered
        // (by_agent_id): an agent is shown by its name.
        const ag = a.by && this.state.agents[a.by];
        const by = ag ? ag.title || ag.display_name || ag.name || a.by : a.by;
        const text = d.state === "answered"
          ? "Answered elsewhere" + (by ? " by " + by : "") + ": " + (a.option || a.text || "") + " — " + d.question
          : "Cancelled: " + d.question;
        patch.teamClosed = [...this.state.teamClosed, { decision_id: d.decision_id, text }].slice(-5);
      }
    }
    if (m.type === "team_goal_changed" && m.goal && !this.state.teamGoal) patch.teamGoal = m.goal.goal_id;
    this.set(patch);
  }

  note(text) { this.set({ notice: text }); }

  fail(what) {
    return (e) => this.note(what + ": " + (e.code ? e.code + " " : "") + e.message + (e.data && e.data.kind ? " (" + e.data.kind + ")" : ""));
  }

  async onOnline() {
    try {
      await this.refreshAgents();
    } catch (e) { this.fail("agent.list")(e); }
    // The page's node first: the selected agent may be another node's.
    await this.refreshCluster();
    if (this.state.movedFrom) {
      const to = (this.state.cluster && this.state.cluster.node) || location.host;
      this.set({ moved: { from: this.state.movedFrom, to }, movedFrom: "" });
    }
    if (this.state.selected) this.attach(this.state.selected);
    this.refreshSide();
    this.refreshCatalog();
    this.refreshTeam().catch(() => {});
    // Attached-client counts and costs change without an event of their
    // own (docs/protocol.md): re-read agent.list while online.
    if (!this.poll) {
      this.poll = setInterval(() => {
        if (this.state.conn === State.online) this.refreshAgents(true).catch(() => {});
      }, AGENT_POLL_MS);
    }
    // Node health and load change without an event (docs/protocol.md
    // §10.1 cluster.status): re-read it while online, and at each
    // (re)connect above.
    if (!this.clusterPoll) {
      this.clusterPoll = setInterval(() => {
        if (this.state.conn === State.online && this.state.cluster && this.state.cluster.enabled) this.refreshCluster();
      }, CLUSTER_POLL_MS);
    }
  }

  // refreshCluster reads cluster.status. A single shardd answers
  // {enabled: false}; a daemon that predates the command refuses it
  // (INVALID_REQUEST): both leave the page unclustered.
  //
  // A node alive again (or anew) after this page saw it otherwise: the
  // events of its jobs and workspaces while it was away never reached
  // this page, and the lists left its items out, so the panels are read
  // again (docs/protocol.md §13 "Events of other nodes").
  refreshCluster() {
    const was = this.state.cluster && this.state.cluster.enabled
      ? new Map((this.state.cluster.nodes || []).map((n) => [n.node, n.health + "/" + n.incarnation])) : null;
    return this.conn.call({ type: "cluster.status" }).then(
      (d) => {
        this.set({ cluster: d || null });
        // A node back may be alive before its daemon answers a list: a
        // list that still left out an alive node is read again at the
        // next poll, until it answers.
        const missing = new Set([...(this.state.sideMissing.jobs || []), ...(this.state.sideMissing.workspaces || [])]);
        if (was && d && d.enabled && (d.nodes || []).some((n) => n.health === "alive" && (was.get(n.node) !== "alive/" + n.incarnation || missing.has(n.node)))) this.refreshSide();
      },
      () => this.set({ cluster: null }));
  }

  // refreshAgents reads agent.list. A poll (quiet) takes from it only what
  // no event tells: status and mode come live from events, and the
  // registry's copy may lag the broadcast by a moment, so a poll must not
  // set an agent back to a status it has already left.
  //
  // A poll does take provider and model: a model_changed reaches this page
  // only for the agent it is attached to, so the other agents' switches
  // (another client's set_model, across providers too) show from the poll.
  // An answer read before a model_changed this page has seen is older than
  // it: that agent keeps the event's provider and model.
  async refreshAgents(quiet) {
    const seen = { ...this.modelSeq };
    const list = await this.overviewAgents();
    const agents = {};
    for (const a of list) {
      const had = this.state.agents[a.agent_id];
      const stale = had && (this.modelSeq[a.agent_id] || 0) !== (seen[a.agent_id] || 0);
      const sel = stale ? { provider: had.provider, model: had.model } : { provider: a.provider, model: a.model };
      agents[a.agent_id] = quiet && had
        ? { ...had, attached_clients: a.attached_clients, usage: laterUsage(had.usage, a.usage), ...sel, title: a.title }
        : { ...had, ...a, ...sel, title: a.title, usage: laterUsage(had && had.usage, a.usage) };
    }
    this.set({ agents });
  }

  // overviewAgents reads the agents the overview shows: the live ones
  // (agent.list active) and the recent ones (since_ms), each followed
  // through next_cursor up to a bound, plus the selected agent wherever it
  // is. A daemon without the filters answers every agent to each ask.
  async overviewAgents() {
    const byID = new Map();
    const read = async (cmd) => {
      let cursor;
      for (let i = 0; i < OVERVIEW_PAGES; i++) {
        const data = await this.conn.call({ type: "agent.list", ...cmd, limit: OVERVIEW_PAGE, ...(cursor ? { cursor } : {}) });
        for (const a of data.agents || []) byID.set(a.agent_id, a);
        cursor = data.next_cursor;
        if (!cursor) return;
      }
    };
    await read({ active: true });
    await read({ since_ms: Date.now() - RECENT_MS });
    const sel = this.state.selected;
    if (sel && !byID.has(sel)) {
      try {
        const data = await this.conn.call({ type: "agent.status", agent_id: sel });
        for (const a of data.agents || []) byID.set(a.agent_id, a);
      } catch (e) { /* gone: the overview simply lacks it */ }
    }
    return [...byID.values()];
  }

  // refreshCatalog reads the daemon's models (models.list): every model of
  // every configured provider, and the default, before any agent runs.
  // The catalog changes only with the daemon's config, so once per
  // connection is enough.
  refreshCatalog() {
    this.conn.call({ type: "models.list" }).then(
      (d) => this.set({ catalog: { models: (d && d.models) || [], default: (d && d.default) || null } }),
      () => this.set({ catalog: null }));
  }

  // refreshSideSoon is refreshSide once for a burst of events (a parallel
  // job's children spawn together).
  refreshSideSoon() {
    if (this.sideTimer) return;
    this.sideTimer = setTimeout(() => { this.sideTimer = null; this.refreshSide(); }, 250);
  }

  // refreshSide reads the jobs and workspaces panels. The lists name the
  // nodes whose items they left out (unavailable_nodes, docs/protocol.md
  // §13): refreshCluster reads them again while one of those is alive.
  refreshSide() {
    this.conn.call({ type: "jobs.list", limit: 50 }).then(
      (d) => this.set({ jobs: d.jobs || [], sideMissing: { ...this.state.sideMissing, jobs: d.unavailable_nodes || [] } }), () => {});
    this.conn.call({ type: "workspace.list" }).then(
      (d) => this.set({ workspaces: d.workspaces || [], sideMissing: { ...this.state.sideMissing, workspaces: d.unavailable_nodes || [] } }), () => {});
  }

  // refreshJobs reads the parent's jobs with subagent.status, which also
  // makes this connection one that speaks for the parent: the daemon sends
  // subagent_run_changed only to those (§10.3).
  refreshJobs(parent) {
    return this.conn.call({ type: "subagent.status", parent_agent_id: parent }).then((d) => {
      // subagent.status says no node: a job keeps the one jobs.list said.
      const known = new Map(this.state.jobs.map((j) => [j.job_id, j.node]));
      const mine = (d.jobs || []).map((j) => (j.node || !known.get(j.job_id) ? j : { ...j, node: known.get(j.job_id) }));
      const others = this.state.jobs.filter((j) => j.parent_agent_id !== parent);
      this.set({ jobs: [...mine, ...others].sort((a, b) => (b.created_at || 0) - (a.created_at || 0)) });
    }, () => {});
  }

  // awaitSteer re-reads the parent's jobs once a steer is answered: the
  // daemon records a steer against its run (RunSnapshot.steers) before it
  // answers it, so that read holds it.
  awaitSteer(parent) {
    this.refreshJobs(parent);
  }

  async attach(id) {
    this.set({ attached: "" }); // a new connection, or another agent: not attached until answered
    // Another node's agent is attached like any other: the page's daemon
    // forwards the commands to its node (docs/protocol.md §13 "Agents of
    // other nodes"). A node it cannot reach now refuses the attach
    // (NODE_UNAVAILABLE); the view says so instead, until an attach
    // succeeds.
    if (this.state.elsewhere[id]) {
      const rest = { ...this.state.elsewhere };
      delete rest[id];
      this.set({ elsewhere: rest });
    }
    try {
      await this.conn.call({ type: "agent.attach", agent_id: id, role: "interactive" });
    } catch (e) {
      const node = unreachableNode(e, this.state.agents[id] && this.state.agents[id].node);
      if (node) { this.set({ elsewhere: { ...this.state.elsewhere, [id]: { node, why: e.message || "" } } }); return; }
      this.fail("attach")(e);
      return;
    }
    if (this.state.selected === id) this.set({ attached: id });
    this.refreshJobs(id);
  }

  // catalogKey names one runtime of one agent on one connection: the
  // tuple {connection generation, agent_id, runtime_epoch} of §9.1.
  catalogKey(id, epoch) { return this.conn.gen + "/" + id + "/" + epoch; }

  // loadCatalogs reads the mode, model and reasoning catalogs of the
  // selected agent's runtime generation epoch. Every sync whose tuple
  // differs from the one the catalogs came from triggers it (an attach, a
  // reconnect, a new runtime after a restart); an answer that arrives
  // after the tuple moved on is from a superseded runtime and dropped.
  loadCatalogs(id, epoch) {
    const key = this.catalogKey(id, epoch);
    this.catKey = key;
    this.set({ catalogEpoch: epoch });
    const live = () => this.catKey === key && this.state.selected === id;
    this.conn.call({ type: "list_modes", agent_id: id }).then((d) => { if (live()) this.set({ modes: d.modes || [] }); }, () => { if (live()) this.set({ modes: [] }); });
    this.conn.call({ type: "list_models", agent_id: id }).then((d) => {
      if (live()) this.set({ models: d.models || [], activeModel: d.active || null });
    }, () => { if (live()) this.set({ models: [], activeModel: null }); });
    this.loadReasoning(id, key);
  }

  // loadReasoning reads the active model's reasoning levels, when the
  // runtime offers them (capability reasoning-catalog, §9.2).
  loadReasoning(id, key = this.catKey) {
    const caps = this.state.transcript.capabilities || [];
    if (!caps.includes("reasoning-catalog")) { this.set({ reasoning: null }); return; }
    this.conn.call({ type: "list_reasoning_levels", agent_id: id }).then((d) => {
      if (this.catKey === key && this.state.selected === id) this.set({ reasoning: d && d.levels ? d : null });
    }, () => { if (this.catKey === key && this.state.selected === id) this.set({ reasoning: null }); });
  }

  select(id) {
    const prev = this.state.selected;
    if (prev === id) return;
    // an agent whose node could not be reached was never attached (attach above): nothing to detach
    if (prev && !this.state.elsewhere[prev]) this.conn.call({ type: "agent.detach", agent_id: prev }).catch(() => {});
    if (this.state.view !== "team") history.replaceState(null, "", id ? "#agent=" + id : location.pathname);
    this.catKey = "";
    this.set({ selected: id, transcript: initial(), modes: [], models: [], closed: [], catalogEpoch: null, activeModel: null, reasoning: null });
    if (id && this.state.conn === State.online) this.attach(id);
  }

  onEvent(m) {
    const t = this.state;
    const team = applyTeamEvent(t.team, m);
    if (team) { this.onTeamEvent(m, team); return; }
    switch (m.type) {
      case "agent_spawned":
      case "agent_updated": { // a new title (agent.update, or automatic)
        const old = t.agents[m.agent_id] || {};
        const next = { ...old, ...m.info, usage: laterUsage(old.usage, m.info && m.info.usage) };
        if (m.type === "agent_updated") next.title = m.info && m.info.title; // absent: cleared
        this.set({ agents: { ...t.agents, [m.agent_id]: next } });
        // A new subagent is a new job's (or run's): the panels learn of
        // it now, not at the run's end. A run another node took makes
        // its workspace here only when it ends (docs/protocol.md §13
        // "Runs on other nodes"), so no workspace event says so earlier.
        if (m.type === "agent_spawned" && m.info && m.info.parent_agent_id) this.refreshSideSoon();
        return;
      }
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
        // agent_exited (§10.2): why the runtime generation ended, shown
        // until a new one runs.
        if (m.type === "agent_exited") next.exit = { reason: m.reason || "", exit_code: m.exit_code };
        if (m.runtime_state === "running") delete next.exit;
        const patch = { agents: { ...t.agents, [m.agent_id]: next } };
        // The selected agent's runtime is gone: nothing streams and its
        // open requests died with it (a new runtime's sync says what is).
        if (m.type === "agent_exited" && m.agent_id === t.selected) {
          patch.transcript = { ...t.transcript, status: "error", pending: t.transcript.pending.filter((r) => r.agent_id && r.agent_id !== m.agent_id) };
        }
        this.set(patch);
        return;
      }
      case "subagent_run_changed":
        this.set({ jobs: applyRunChange(t.jobs, m) });
        // The event carries the run's state only: re-read the parent's
        // jobs for the rest (a new run, the job's own state when the run
        // ended, the steers recorded against the run).
        this.refreshJobs(m.parent_agent_id);
        return;
      // Daemon broadcasts; in a cluster every node's reach every page,
      // each with its node (docs/protocol.md §13 "Events of other nodes"):
      // the lists are read again, cluster-wide.
      case "workspace_created": case "workspace_attached": case "workspace_retired": case "workspace_conflict":
        this.refreshSide();
        return;
    }
    if (!m.agent_id || !t.selected) return;
    // A delegated request keeps its child's agent_id (§6.3): it reaches
    // this page because the selected agent is its interactive ancestor.
    if (m.agent_id !== t.selected && !requestTypes.has(m.type)) return;
    let patch = {};
    const open = (m.type === "permission_resolved" || m.type === "ui_resolved") && t.transcript.pending.find((p) => p.request_id === m.request_id);
    if (open) {
      const who = m.source ? " from " + m.source : "";
      const ans = m.type === "ui_resolved" ? JSON.stringify(m.value) : (m.choice_id || m.decision);
      // A notify asks nothing, and its runtime may close it at once: what
      // stays is the notice itself.
      const text = open.kind === "notify"
        ? "Notice" + (open.notify_type && open.notify_type !== "info" ? " (" + open.notify_type + ")" : "") + ": " + (open.title || "") + (open.message ? " — " + open.message : "")
        : "Answered" + who + ": " + ans;
      patch.closed = [...t.closed, { request_id: m.request_id, text, notify: open.kind === "notify" ? open.notify_type || "info" : "" }].slice(-5);
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
    // AgentInfo.usage is the daemon's sum of turn_end usage; a turn's end
    // adds to it here as it does there, so the totals follow live and the
    // next agent.list agrees.
    if (m.type === "turn_end" && m.usage && m.agent_id === t.selected && t.agents[m.agent_id]) {
      const a = (patch.agents || t.agents)[m.agent_id];
      patch.agents = { ...(patch.agents || t.agents), [m.agent_id]: { ...a, usage: addUsage(a.usage, m.usage) } };
    }
    if (m.type === "model_changed" && m.agent_id === t.selected) {
      if (m.active) patch.activeModel = m.active;
      const a = (patch.agents || t.agents)[m.agent_id];
      // AgentInfo.provider/model say what runs (§11): the switch is the
      // agent's at once, as agent.list will say.
      if (a && m.active) {
        patch.agents = { ...(patch.agents || t.agents), [m.agent_id]: { ...a, provider: m.active.provider || a.provider, model: m.active.model || a.model } };
        this.modelSeq[m.agent_id] = (this.modelSeq[m.agent_id] || 0) + 1;
      }
      patch.reasoning = null;
    }
    if (m.type === "reasoning_level_changed" && m.agent_id === t.selected && t.reasoning) {
      patch.reasoning = { ...t.reasoning, model: m.model || t.reasoning.model, active: m.active };
    }
    this.set(patch);
    if (m.type === "sync" && m.agent_id === t.selected) {
      const epoch = m.runtime_epoch || 0;
      if (this.catKey !== this.catalogKey(m.agent_id, epoch)) this.loadCatalogs(m.agent_id, epoch);
    }
    if (m.type === "model_changed" && m.agent_id === t.selected) this.loadReasoning(m.agent_id);
  }

  // ---- commands ----

  // send sends a prompt (§9.2) with the images attached to it (§11 Image).
  // A prompt of images alone is a prompt: its message is "".
  send(text, behavior, images) {
    const id = this.state.selected;
    const ims = images || [];
    if (!id || (!text.trim() && ims.length === 0)) return Promise.resolve(false);
    const msg = { type: "prompt", agent_id: id, message: text.trim() ? text : "" };
    if (ims.length > 0) msg.images = ims.map(wireImage);
    const busy = this.state.transcript.status !== "idle" && this.state.transcript.status !== "error";
    if (behavior || busy) msg.streaming_behavior = behavior || "follow_up";
    return this.conn.call(msg).then(() => {
      this.set({ transcript: addLocalPrompt(this.state.transcript, msg.message, msg.streaming_behavior, ims) });
      return true;
    }, (e) => { this.fail("prompt")(e); return false; });
  }

  // setReasoning selects a reasoning level of the model the picker shows;
  // a stale picker is CONFLICT (§9.2), and the levels are read again.
  setReasoning(effort) {
    const r = this.state.reasoning;
    if (!r || !r.model) return Promise.resolve();
    const id = this.state.selected;
    return this.cmd({ type: "set_reasoning_level", agent_id: id, model: r.model.id, effort }, "reasoning").then((d) => {
      if (this.state.reasoning && d && d.active) this.set({ reasoning: { ...this.state.reasoning, model: d.model || this.state.reasoning.model, active: d.active } });
    }, () => this.loadReasoning(id));
  }

  // rename sets an agent's title with agent.update (additive, §10.1); an
  // empty title clears it. The overview follows from the answer (and from
  // agent.list), whatever events the daemon sends.
  rename(id, title) {
    return this.cmd({ type: "agent.update", agent_id: id, title }, "rename").then((d) => {
      const a = this.state.agents[id];
      const info = d && d.info ? d.info : d && d.agent_id ? d : null;
      if (a) this.set({ agents: { ...this.state.agents, [id]: { ...a, ...(info || {}), title: info && info.title !== undefined ? info.title : title } } });
      return true;
    }, () => false);
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
    for (const k of ["name", "model", "mode", "node"]) if (fields[k]) msg[k] = fields[k];
    // tools and skills are comma-separated lists in the form (docs/protocol.md §10.1).
    for (const k of ["tools", "skills"]) {
      const list = (fields[k] || "").split(",").map((x) => x.trim()).filter(Boolean);
      if (list.length) msg[k] = list;
    }
    // mcp_servers comes built (mcpServersField, docs/protocol.md §10.1).
    if (fields.mcp_servers) msg.mcp_servers = fields.mcp_servers;
    return this.cmd(msg, "create").then((d) => { this.select(d.agent_id); return d; });
  }

  terminate(id) { return this.cmd({ type: "agent.terminate", agent_id: id }, "terminate").catch(() => {}); }
  kill(id) { return this.cmd({ type: "agent.kill", agent_id: id, force: true }, "kill").catch(() => {}); }

  // answerPermission answers with the structured choice (choice_id) when
  // the request offered choices, else the legacy decision (§9.5); reason
  // goes with it when the person gave one (a refusal's why).
  answerPermission(req, choice, reason) {
    const msg = { type: "permission_response", agent_id: req.agent_id || this.state.selected, request_id: req.request_id };
    if (choice.id) msg.choice_id = choice.id; else msg.decision = choice.decision;
    if (reason) msg.reason = reason;
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

/**
 * notifyDecision raises a browser notification for a decision waiting on a
 * person, when the person allowed notifications (Notification.permission
 * "granted"; the page asks only from the team view's button). One per
 * decision: the tag replaces an earlier one of the same decision.
 */
export function notifyDecision(d, onOpen) {
  const N = globalThis.Notification;
  if (!N || N.permission !== "granted") return false;
  try {
    const n = new N("Shard: a decision waits (" + d.kind + ")", { body: d.question || "", tag: "shard-decision-" + d.decision_id });
    // A click brings the page forward on its team view.
    n.onclick = () => { globalThis.focus && globalThis.focus(); if (onOpen) onOpen(); };
    return true;
  } catch {
    return false; // a browser that notifies only from a service worker
  }
}

/** addUsage is a + b, as the daemon sums turn_end usage into
 * AgentInfo.usage; the context size is b's (the latest). */
export function addUsage(a, b) {
  a = a || { input: 0, output: 0 };
  return { ...a, input: (a.input || 0) + (b.input || 0), output: (a.output || 0) + (b.output || 0),
    cache_read: (a.cache_read || 0) + (b.cache_read || 0), cache_write: (a.cache_write || 0) + (b.cache_write || 0),
    cost: (a.cost || 0) + (b.cost || 0), context_tokens: b.context_tokens || a.context_tokens, model: b.model || a.model };
}

/** laterUsage keeps the larger of two usage totals: totals only grow, and
 * an agent.list answered before a turn's end may arrive after it. */
export function laterUsage(had, got) {
  if (!got) return had;
  if (!had) return got;
  return (got.input || 0) + (got.output || 0) >= (had.input || 0) + (had.output || 0) ? got : had;
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
