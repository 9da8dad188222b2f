// The page's orchestration commands beyond the store's basics: strict
// steer and relaunch of a subagent run (docs/protocol.md §10.3), the
// session's forks (§9.2 session_op list and fork) and opening one as an
// agent (§10.1 agent.create with session_id), workspace create and attach
// (§10.1a), and a retire retried with the disposition a refusal asks for.
// Each takes the store; each answers a plain outcome the views show where
// the person acted, and the status line says it too.

/** The refusal data of a failed command ({kind, reason, …}), or null. */
export function refusalOf(e) {
  return e && e.data && typeof e.data === "object" && e.data.kind ? e.data : null;
}

/** A failed command as one line: code, message, refusal kind. */
export function errText(e) {
  const r = refusalOf(e);
  return (e && e.code ? e.code + " " : "") + ((e && e.message) || "failed") + (r ? " (" + r.kind + ")" : "");
}

/**
 * steerRun sends a strict steer into the run's active turn. The daemon
 * answers injected (delivered into turn_id) or conflict (the turn ended
 * first: the steer was dropped, never kept for later); a run that is not
 * active is an error (CONFLICT), as is an unknown one (NOT_FOUND).
 * Resolves {ok, status, turn_id, text}.
 */
export function steerRun(store, job, run, message) {
  return store.conn.call({ type: "subagent.steer", parent_agent_id: job.parent_agent_id, target: run.run_id, message }).then((d) => {
    const text = d.status === "injected"
      ? "injected" + (d.turn_id ? " into " + d.turn_id : "")
      : "conflict: the run's turn ended before the steer was delivered; it was dropped";
    store.note("steer: " + text);
    // The run records the steer (RunSnapshot.steers) once it resolved:
    // re-read the parent's jobs until the record is there.
    store.awaitSteer(job.parent_agent_id);
    return { ok: d.status === "injected", status: d.status, turn_id: d.turn_id || "", text };
  }, (e) => {
    store.note("steer: " + errText(e));
    return { ok: false, status: "error", text: errText(e) };
  });
}

/**
 * relaunchRun gives the run's child a new task as a new job on the same
 * agent, session and alias (any terminal run, completed included). The
 * jobs are re-read so the new job shows with its runs.
 */
export function relaunchRun(store, job, run, task) {
  return store.conn.call({ type: "subagent.relaunch", parent_agent_id: job.parent_agent_id, target: run.run_id, task }).then((d) => {
    store.note("relaunch: done");
    store.refreshSide();
    store.refreshJobs(job.parent_agent_id);
    return { ok: true, text: "queued as " + d.run_id + " (" + d.job_id + ")", data: d };
  }, (e) => {
    store.note("relaunch: " + errText(e));
    return { ok: false, text: errText(e) };
  });
}

/** listSessions reads the agent's session and its forks (session_op list). */
export function listSessions(store, agentID) {
  return store.conn.call({ type: "session_op", agent_id: agentID, op: "list" }).then((d) => d.sessions || []);
}

/**
 * openFork starts a new agent on a fork: agent.create with the fork's
 * session_id adopts it (§9.2 fork, §10.1). The agent works where the
 * source agent does; it is selected once created.
 */
export function openFork(store, source, fork, name) {
  const msg = { type: "agent.create", cwd: source.cwd, session_id: fork.session_id };
  if (name) msg.name = name;
  return store.conn.call(msg).then((d) => {
    store.note("open fork: done");
    store.select(d.agent_id);
    return { ok: true, agent_id: d.agent_id };
  }, (e) => {
    store.note("open fork: " + errText(e));
    return { ok: false, text: errText(e) };
  });
}

// The agent fields workspace.create and workspace.attach share with
// agent.create.
const agentFields = ["name", "model", "mode"];
const workspaceFields = ["label", "branch", "base_ref", "integration_target"];

/**
 * createWorkspace makes a workspace (a new worktree on a new branch of the
 * repository at fields.cwd) with a fresh agent in it, and selects the
 * agent. A refusal keeps its kind (not_a_repository, branch_exists, …).
 */
export function createWorkspace(store, fields) {
  const msg = { type: "workspace.create", cwd: fields.cwd };
  for (const k of [...workspaceFields, ...agentFields]) if (fields[k]) msg[k] = fields[k];
  return store.conn.call(msg).then((d) => {
    store.note("workspace: created " + d.workspace.workspace_id);
    store.refreshSide();
    store.select(d.agent_id);
    return { ok: true, data: d };
  }, (e) => {
    store.note("workspace: " + errText(e));
    return { ok: false, text: errText(e), refusal: refusalOf(e) };
  });
}

/** attachWorkspace starts another fresh agent in the workspace and selects it. */
export function attachWorkspace(store, ws, fields) {
  const msg = { type: "workspace.attach", workspace_id: ws.workspace_id };
  for (const k of agentFields) if (fields && fields[k]) msg[k] = fields[k];
  return store.conn.call(msg).then((d) => {
    store.note("attach: done");
    store.refreshSide();
    store.select(d.agent_id);
    return { ok: true, data: d };
  }, (e) => {
    store.note("attach: " + errText(e));
    return { ok: false, text: errText(e), refusal: refusalOf(e) };
  });
}

/**
 * retireWorkspace retires with the disposition; a refusal comes back whole
 * so the view can say why and, for confirmation_required, offer the retry
 * with the refusal's confirmation_disposition (delete_confirmed).
 */
export function retireWorkspace(store, ws, disposition) {
  return store.conn.call({ type: "workspace.retire", workspace_id: ws.workspace_id, branch_disposition: disposition }).then((d) => {
    store.note("retire: done");
    store.refreshSide();
    return { ok: true, data: d };
  }, (e) => {
    store.note("retire: " + errText(e));
    return { ok: false, text: errText(e), refusal: refusalOf(e) };
  });
}
