// The `subagent` tool's result drawn as a job card instead of its JSON:
// each job with its runs, their states (live: the store applies
// subagent_run_changed to its jobs, docs/protocol.md §10.3) and links that
// open the child agents. The tool's answer is the daemon's response data
// (create, wait, status or stop); anything else falls back to the plain
// result.

import { html } from "./html.js";
import { useStoreState } from "./ctx.js";

/**
 * jobCardData turns a subagent tool result's value into jobs to draw:
 * [{job_id, strategy, state, runs: [{run_id, name, alias, display_name,
 * agent_id, state, error}]}], or null when the value is no job answer.
 * Pure (the unit tests drive it).
 */
export function jobCardData(v) {
  if (!v || typeof v !== "object") return null;
  const byJob = new Map();
  const jobOf = (id, extra) => {
    if (!byJob.has(id)) byJob.set(id, { job_id: id, strategy: "", state: "", runs: [], ...extra });
    return byJob.get(id);
  };
  const addRun = (jobID, r) => {
    const j = jobOf(jobID || r.job_id || "");
    if (!j.runs.some((x) => x.run_id === r.run_id)) j.runs.push(r);
  };
  if (typeof v.job_id === "string" && Array.isArray(v.runs)) { // create
    jobOf(v.job_id, { strategy: v.strategy || "" });
    for (const r of v.runs) addRun(v.job_id, r);
  } else if (Array.isArray(v.runs)) { // wait
    for (const r of v.runs) if (r && r.run_id) addRun(r.job_id, r);
  } else if (Array.isArray(v.jobs) || Array.isArray(v.agents)) { // status
    for (const j of v.jobs || []) {
      const job = jobOf(j.job_id, { strategy: j.strategy || "", state: j.state || "" });
      for (const r of j.runs || []) addRun(job.job_id, r);
    }
    for (const a of v.agents || []) if (a.run && a.run.run_id) addRun(a.run.job_id, { agent_id: a.agent_id, alias: a.alias, display_name: a.display_name, ...a.run });
  } else if (Array.isArray(v.cancelled)) { // stop
    for (const r of v.cancelled) addRun(v.job_id || "", r);
  } else {
    return null;
  }
  const jobs = [...byJob.values()];
  return jobs.length > 0 ? jobs : null;
}

/** live overlays the store's newest knowledge of a job and its runs. */
function live(job, s) {
  const known = s && s.jobs.find((j) => j.job_id === job.job_id);
  if (!known) return job;
  const runs = job.runs.map((r) => ({ ...r, ...((known.runs || []).find((k) => k.run_id === r.run_id) || {}) }));
  return { ...job, strategy: known.strategy || job.strategy, state: known.state || job.state, runs };
}

function runName(r, s) {
  const a = r.agent_id && s && s.agents[r.agent_id];
  return r.display_name || (a && (a.display_name || a.name)) || r.alias || r.name || r.run_id;
}

/** The job card of a subagent tool result (fallback: null, the plain result draws). */
export function JobCard({ value }) {
  const [, s] = useStoreState();
  const jobs = jobCardData(value);
  if (!jobs) return null;
  return html`<div class="jobcards">${jobs.map((j0) => {
    const j = live(j0, s);
    return html`<div class=${"jobcard js-" + (j.state || "unknown")} data-job=${j.job_id}>
      <div class="jc-head"><b>Job</b> <code>${j.job_id || "?"}</code>${j.strategy ? " · " + j.strategy : ""}${j.state ? html` · <span class="state">${j.state}</span>` : null}
        ${value.timed_out ? html` <span class="badge">wait timed out</span>` : null}</div>
      <ul class="jc-runs">${j.runs.map((r) => html`<li class=${"jc-run rs-" + r.state} data-run=${r.run_id}>
        <span class=${"dot st-" + runDot(r.state)}></span> <span class="name">${runName(r, s)}</span>
        <span class="state">${r.state}</span>${r.error ? html` <span class="err">${r.error}</span>` : null}
        ${r.agent_id ? html` <a class="jc-open" href=${"#agent=" + r.agent_id} title=${"open " + r.agent_id}>open agent</a>` : null}
      </li>`)}</ul>
    </div>`;
  })}</div>`;
}

// runDot maps a run state onto the overview's status dot colours.
function runDot(state) {
  switch (state) {
    case "active": case "starting": return "streaming";
    case "completed": return "idle";
    case "failed": case "timed_out": return "error";
    default: return "none";
  }
}
