// The side panel: background jobs and their runs (live from
// subagent_run_changed; stop and relaunch), and workspaces (diff, merge,
// retire; a refusal's kind and reason are shown as the daemon gave them).

import { useState } from "../vendor/hooks.mjs";
import { html } from "./html.js";
import { hl } from "./highlight.js";
import { langOf } from "./syntax.js";

const terminal = new Set(["completed", "failed", "timed_out", "cancelled", "interrupted"]);

function ago(ms) {
  if (!ms) return "";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 60 ? s + "s ago" : s < 3600 ? Math.round(s / 60) + "m ago" : Math.round(s / 3600) + "h ago";
}

function Run({ job, run, store }) {
  const [task, setTask] = useState("");
  const [open, setOpen] = useState(false);
  const dur = run.started_at ? ((run.ended_at || Date.now()) - run.started_at) / 1000 : 0;
  return html`<li class=${"run rs-" + run.state} data-run=${run.run_id}>
    <span class="name">${run.display_name || run.alias || run.name}</span> <span class="state">${run.state}</span>
    ${dur ? html` <span class="dur">${dur.toFixed(1)} s</span>` : null}${run.error ? html` <span class="err">${run.error}</span>` : null}
    ${!terminal.has(run.state) ? html` <button onClick=${() => store.stopRun(job, run)}>Stop</button>` : null}
    ${terminal.has(run.state) && run.state !== "completed" ? html` <button onClick=${() => setOpen(!open)}>Relaunch…</button>` : null}
    ${open ? html`<form onSubmit=${(e) => { e.preventDefault(); store.relaunch(job, run, task); setOpen(false); }}>
      <input aria-label="Task" placeholder="task for the relaunched run" value=${task} onInput=${(e) => setTask(e.target.value)} required />
      <button type="submit">Relaunch</button></form>` : null}
  </li>`;
}

function Jobs({ s, store }) {
  const jobs = s.selected ? s.jobs.filter((j) => j.parent_agent_id === s.selected) : s.jobs;
  return html`<section id="jobs"><h2>Jobs <span class="count">${jobs.length}</span></h2>
    ${jobs.length === 0 ? html`<p class="empty">No jobs${s.selected ? " for this agent" : ""}.</p>` : null}
    <ul class="jobs">${jobs.map((j) => html`<li class=${"job js-" + j.state} data-job=${j.job_id}>
      <div><b>${j.strategy}</b> <span class="state">${j.state}</span> <span class="when">${ago(j.created_at)}</span>
        ${!terminal.has(j.state) ? html` <button onClick=${() => store.stopRun(j, null)}>Stop job</button>` : null}</div>
      <ul class="runs">${(j.runs || []).map((r) => html`<${Run} key=${r.run_id} job=${j} run=${r} store=${store} />`)}</ul>
    </li>`)}</ul></section>`;
}

function Diff({ d, onClose }) {
  const [split, setSplit] = useState(false);
  return html`<div class="wsdiff" id="ws-diff">
    <div class="wsdiff-head"><b>${d.branch}</b> → ${d.integration_target} · ${d.stats.files} files +${d.stats.additions} −${d.stats.deletions}${d.truncated ? " (truncated)" : ""}
      <button onClick=${() => setSplit(!split)}>${split ? "Unified" : "Side by side"}</button> <button onClick=${onClose}>Close</button></div>
    ${d.files.map((f) => { const lang = langOf(f.path); return html`<div class="dfile" data-lang=${lang}><div class="r-path">${f.status} ${f.old_path ? f.old_path + " → " : ""}${f.path}${f.binary ? " (binary)" : ""}</div>
      ${f.hunks.map((h) => html`<div class="hunk"><div class="dl hdr">${h.header}</div>
        ${split
          ? html`<table class="split"><tbody>${h.lines.map((l) => html`<tr class=${l.kind}><td class="no">${l.old_no || ""}</td><td class="o">${l.kind !== "add" ? hl(l.text, lang) : ""}</td><td class="no">${l.new_no || ""}</td><td class="n">${l.kind !== "del" ? hl(l.text, lang) : ""}</td></tr>`)}</tbody></table>`
          : h.lines.map((l) => html`<div class=${"dl " + l.kind}><span class="no">${l.old_no || ""}</span><span class="no">${l.new_no || ""}</span>${l.kind === "add" ? "+" : l.kind === "del" ? "-" : " "}${hl(l.text, lang)}</div>`)}
      </div>`)}</div>`; })}
  </div>`;
}

function Workspaces({ s, store }) {
  const ws = s.workspaces;
  return html`<section id="workspaces"><h2>Workspaces <span class="count">${ws.length}</span></h2>
    ${ws.length === 0 ? html`<p class="empty">No workspaces.</p>` : null}
    <ul class="wss">${ws.map((w) => html`<li class=${"ws wst-" + w.state} data-workspace=${w.workspace_id}>
      <div><b>${w.label || w.branch}</b> <span class="state">${w.state}</span> <span class="meta">${w.branch} → ${w.integration_target || "?"} · ${w.agent_count} agent(s)</span></div>
      <div class="wbtns"><button onClick=${() => store.showDiff(w)}>Diff</button>
        <button onClick=${() => store.merge(w, "merge")}>Merge</button><button onClick=${() => store.merge(w, "squash")}>Squash</button>
        <button onClick=${() => store.retire(w, "delete_if_merged")}>Retire</button><button onClick=${() => store.retire(w, "keep")}>Retire, keep branch</button></div>
    </li>`)}</ul>
    ${s.diff ? html`<${Diff} d=${s.diff} onClose=${() => store.set({ diff: null })} />` : null}
  </section>`;
}

/** The side panel. */
export function Side({ s, store }) {
  return html`<${Jobs} s=${s} store=${store} /><${Workspaces} s=${s} store=${store} />`;
}
