// The side panel: background jobs and their runs (live from
// subagent_run_changed; stop, strict steer and relaunch), the selected
// agent's session and its forks (fork, open a fork as an agent), and
// workspaces (diff, merge, attach another agent, retire; a refusal's kind
// and reason are shown as the daemon gave them, and a retire refused with
// confirmation_required offers the confirmed retry).

import { useEffect, useState } from "../vendor/hooks.mjs";
import { html } from "./html.js";
import { hl } from "./highlight.js";
import { langOf } from "./syntax.js";
import { ModelChoice, modelField } from "./overview.js";
import { steerRun, relaunchRun, listSessions, openFork, attachWorkspace, retireWorkspace, errText } from "./orch.js";

const terminal = new Set(["completed", "failed", "timed_out", "cancelled", "interrupted"]);

// steerable: the run states a steer may be aimed at. subagent.steer takes
// only an active run; starting is offered too (it becomes active at once)
// and the daemon's CONFLICT says so when it is not yet.
const steerable = new Set(["starting", "active"]);

function ago(ms) {
  if (!ms) return "";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 60 ? s + "s ago" : s < 3600 ? Math.round(s / 60) + "m ago" : Math.round(s / 3600) + "h ago";
}

/** A steer's time: its age, and the moment itself as the tooltip. */
function when(ms) {
  return ms ? html`<time datetime=${new Date(ms).toISOString()} title=${new Date(ms).toLocaleString()}>${ago(ms)}</time>` : null;
}

/**
 * The steers recorded against a run (RunSnapshot.steers, docs/protocol.md
 * §10.3 "recorded against the run"): who steered (the parent's
 * subagent.steer, or a person steering the leased child directly), whether
 * it reached the run's turn (injected) or was dropped (conflict), the turn,
 * and when. The message text is private and never on the wire.
 */
export function RunSteers({ steers }) {
  if (!steers || steers.length === 0) return null;
  return html`<ul class="run-steers" aria-label="Steers of this run">${steers.map((x) => html`<li key=${x.correlation_id}
      class=${"rsteer " + (x.status === "injected" ? "ok" : "bad")} data-correlation=${x.correlation_id} data-source=${x.source}
      data-status=${x.status} data-turn=${x.turn_id || ""}>
    <span class="src">${x.source === "client" ? "person" : x.source === "parent" ? "parent" : x.source}</span> steer
    · <span class="st">${x.status}</span>${x.turn_id ? html` · <code class="turn">${x.turn_id}</code>` : null}${x.at ? html` · ${when(x.at)}` : null}
  </li>`)}</ul>`;
}

function Run({ job, run, store }) {
  const [text, setText] = useState("");
  const [open, setOpen] = useState(""); // "", "steer", "relaunch"
  const [out, setOut] = useState(null); // {kind, ok, text}: the last steer or relaunch answer
  const [sending, setSending] = useState(false);
  const dur = run.started_at ? ((run.ended_at || Date.now()) - run.started_at) / 1000 : 0;
  const toggle = (k) => { setOpen(open === k ? "" : k); setText(""); };
  const submit = (e) => {
    e.preventDefault();
    const kind = open;
    setSending(true);
    const p = kind === "steer" ? steerRun(store, job, run, text) : relaunchRun(store, job, run, text);
    p.then((r) => { setSending(false); setOut({ kind, ...r }); if (r.ok) { setOpen(""); setText(""); } });
  };
  return html`<li class=${"run rs-" + run.state} data-run=${run.run_id} data-agent-id=${run.agent_id || ""}>
    <span class="name">${run.display_name || run.alias || run.name}</span> <span class="state">${run.state}</span>
    ${dur ? html` <span class="dur">${dur.toFixed(1)} s</span>` : null}${run.error ? html` <span class="err">${run.error}</span>` : null}
    ${run.agent_id ? html` <a class="run-open" href=${"#agent=" + run.agent_id}>open</a>` : null}
    ${!terminal.has(run.state) ? html` <button onClick=${() => store.stopRun(job, run)}>Stop</button>` : null}
    ${steerable.has(run.state) ? html` <button class="run-steer" onClick=${() => toggle("steer")}>Steer…</button>` : null}
    ${terminal.has(run.state) ? html` <button class="run-relaunch" onClick=${() => toggle("relaunch")}>Relaunch…</button>` : null}
    ${open ? html`<form class=${"runform " + open} onSubmit=${submit}>
      <input aria-label=${open === "steer" ? "Steer message" : "Task"} placeholder=${open === "steer" ? "message into the run's current turn" : "task for the relaunched run"}
        value=${text} onInput=${(e) => setText(e.target.value)} required />
      <button type="submit" disabled=${sending}>${open === "steer" ? "Steer" : "Relaunch"}</button></form>` : null}
    ${out ? html`<div class=${"run-out " + out.kind + (out.ok ? " ok" : " bad")} data-status=${out.status || ""} data-turn=${out.turn_id || ""}>${out.kind}: ${out.text}</div>` : null}
    <${RunSteers} steers=${run.steers} />
  </li>`;
}

// nodeBadge names the cluster node holding a job or workspace (its `node`,
// docs/protocol.md §13 "Jobs and workspaces of other nodes"); nothing on a
// single shardd, whose lists carry no node.
function nodeBadge(node) {
  return node ? html` <span class="badge node" data-node=${node}>on ${node}</span>` : null;
}

function Jobs({ s, store }) {
  const jobs = s.selected ? s.jobs.filter((j) => j.parent_agent_id === s.selected) : s.jobs;
  return html`<section id="jobs"><h2>Jobs <span class="count">${jobs.length}</span></h2>
    ${jobs.length === 0 ? html`<p class="empty">No jobs${s.selected ? " for this agent" : ""}.</p>` : null}
    <ul class="jobs">${jobs.map((j) => html`<li class=${"job js-" + j.state} data-job=${j.job_id} data-node=${j.node || ""}>
      <div><b>${j.strategy}</b> <span class="state">${j.state}</span> <span class="when">${ago(j.created_at)}</span>${nodeBadge(j.node)}
        ${!terminal.has(j.state) ? html` <button onClick=${() => store.stopRun(j, null)}>Stop job</button>` : null}</div>
      <ul class="runs">${(j.runs || []).map((r) => html`<${Run} key=${r.run_id} job=${j} run=${r} store=${store} />`)}</ul>
    </li>`)}</ul></section>`;
}

/**
 * Diff draws a workspace.diff answer (docs/protocol.md §10.1a), unified or
 * side by side, with syntax tokens. The workspaces panel shows it as an
 * overlay; the team's merge decisions show it inline (id and className
 * given, onClose omitted: no Close button).
 */
export function Diff({ d, onClose, id = "ws-diff", className = "wsdiff" }) {
  const [split, setSplit] = useState(false);
  return html`<div class=${className} id=${id}>
    <div class="wsdiff-head"><b>${d.branch}</b> → ${d.integration_target} · ${d.stats.files} files +${d.stats.additions} −${d.stats.deletions}${d.truncated ? " (truncated)" : ""}
      <button onClick=${() => setSplit(!split)}>${split ? "Unified" : "Side by side"}</button>${onClose ? html` <button onClick=${onClose}>Close</button>` : null}</div>
    ${d.files.map((f) => { const lang = langOf(f.path); return html`<div class="dfile" data-lang=${lang}><div class="r-path">${f.status} ${f.old_path ? f.old_path + " → " : ""}${f.path}${f.binary ? " (binary)" : ""}</div>
      ${f.hunks.map((h) => html`<div class="hunk"><div class="dl hdr">${h.header}</div>
        ${split
          ? html`<table class="split"><tbody>${h.lines.map((l) => html`<tr class=${l.kind}><td class="no">${l.old_no || ""}</td><td class="o">${l.kind !== "add" ? hl(l.text, lang) : ""}</td><td class="no">${l.new_no || ""}</td><td class="n">${l.kind !== "del" ? hl(l.text, lang) : ""}</td></tr>`)}</tbody></table>`
          : h.lines.map((l) => html`<div class=${"dl " + l.kind}><span class="no">${l.old_no || ""}</span><span class="no">${l.new_no || ""}</span>${l.kind === "add" ? "+" : l.kind === "del" ? "-" : " "}${hl(l.text, lang)}</div>`)}
      </div>`)}</div>`; })}
  </div>`;
}

function Ws({ w, catalog, store }) {
  const [refusal, setRefusal] = useState(null); // the last retire or attach refusal: {what, text, data}
  const [attaching, setAttaching] = useState(false);
  const [name, setName] = useState("");
  const [model, setModel] = useState("");
  const retire = (disposition) => retireWorkspace(store, w, disposition).then((r) => setRefusal(r.ok ? null : { what: "retire", text: r.text, data: r.refusal }));
  const attach = (e) => {
    e.preventDefault();
    attachWorkspace(store, w, { name, model: modelField(model, catalog) }).then((r) => {
      if (r.ok) { setAttaching(false); setName(""); setModel(""); setRefusal(null); } else setRefusal({ what: "attach", text: r.text, data: r.refusal });
    });
  };
  const rd = refusal && refusal.data;
  return html`<li class=${"ws wst-" + w.state} data-workspace=${w.workspace_id} data-node=${w.node || ""}>
    <div><b>${w.label || w.branch}</b> <span class="state">${w.state}</span> <span class="meta">${w.branch} → ${w.integration_target || "?"} · ${w.agent_count} agent(s)</span>${nodeBadge(w.node)}</div>
    <div class="wbtns"><button onClick=${() => store.showDiff(w)}>Diff</button>
      <button onClick=${() => store.merge(w, "merge")}>Merge</button><button onClick=${() => store.merge(w, "squash")}>Squash</button>
      <button onClick=${() => retire("delete_if_merged")}>Retire</button><button onClick=${() => retire("keep")}>Retire, keep branch</button>
      <button class="ws-attach" onClick=${() => setAttaching(!attaching)}>New agent here…</button></div>
    ${attaching ? html`<form class="ws-attach-form" onSubmit=${attach}>
      <input aria-label="Agent name" placeholder="name (optional)" value=${name} onInput=${(e) => setName(e.target.value)} />
      <${ModelChoice} id=${"ws-model-" + w.workspace_id} catalog=${catalog} value=${model} onChange=${setModel} />
      <button type="submit">Attach agent</button></form>` : null}
    ${refusal ? html`<div class="ws-refusal" data-kind=${rd ? rd.kind : ""}>
      <div><b>${refusal.what} refused${rd ? " (" + rd.kind + ")" : ""}</b>: ${rd ? rd.reason : refusal.text}</div>
      ${rd && rd.agent_ids && rd.agent_ids.length ? html`<div>Agents: ${rd.agent_ids.map((id) => html`<a href=${"#agent=" + id}>${id}</a> `)}</div>` : null}
      ${rd && rd.paths && rd.paths.length ? html`<div class="paths">${rd.paths.join(", ")}${rd.paths_truncated ? " …" : ""}</div>` : null}
      ${rd && rd.kind === "confirmation_required" && rd.confirmation_disposition
        ? html`<button class="ws-confirm danger" onClick=${() => retire(rd.confirmation_disposition)}>Retire and delete the branch anyway (${rd.confirmation_disposition})</button> `
        : null}
      <button class="ws-refusal-close" onClick=${() => setRefusal(null)}>Dismiss</button>
    </div>` : null}
  </li>`;
}

function Workspaces({ s, store }) {
  const ws = s.workspaces;
  return html`<section id="workspaces"><h2>Workspaces <span class="count">${ws.length}</span></h2>
    ${ws.length === 0 ? html`<p class="empty">No workspaces.</p>` : null}
    <ul class="wss">${ws.map((w) => html`<${Ws} key=${w.workspace_id} w=${w} catalog=${s.catalog} store=${store} />`)}</ul>
    ${s.diff ? html`<${Diff} d=${s.diff} onClose=${() => store.set({ diff: null })} />` : null}
  </section>`;
}

// Fork rows: the session_op list answer's forks, each openable as an
// agent (agent.create {cwd, session_id}).
function Fork({ f, source, store }) {
  const [out, setOut] = useState("");
  const [busy, setBusy] = useState(false);
  const open = () => {
    setBusy(true);
    openFork(store, source, f, (source.name || source.display_name || "agent") + " fork").then((r) => { setBusy(false); setOut(r.ok ? "" : r.text); });
  };
  return html`<li class="fork" data-fork=${f.fork_id} data-session=${f.session_id || ""}>
    <code>${f.fork_id}</code> <span class="meta">${f.entries} entries${f.created_at ? " · " + ago(f.created_at) : ""}${f.corrupt ? " · unreadable" : ""}</span>
    ${f.corrupt ? null : html` <button class="fork-open" disabled=${busy} onClick=${open}>Open as agent</button>`}
    ${out ? html`<div class="fork-out bad">open: ${out}</div>` : null}
  </li>`;
}

function Forks({ s, store }) {
  const [list, setList] = useState(null);
  const [err, setErr] = useState("");
  const id = s.attached === s.selected ? s.attached : "";
  // Re-read on a new attachment, after a fork, and after each turn (the
  // session grew).
  const turns = s.transcript.items.filter((e) => e.kind === "turn").length;
  useEffect(() => { setList(null); setErr(""); }, [id]);
  useEffect(() => {
    if (!id) return undefined;
    let live = true;
    listSessions(store, id).then((l) => { if (live) { setList(l); setErr(""); } }, (e) => { if (live) setErr(errText(e)); });
    return () => { live = false; };
  }, [id, s.forked, turns]);
  if (!s.selected) return null;
  const source = s.agents[s.selected] || { agent_id: s.selected, cwd: "" };
  const forks = (list || []).filter((x) => x.kind === "fork");
  const cur = (list || []).find((x) => x.current);
  return html`<section id="forks"><h2>Forks <span class="count">${forks.length}</span>
      <button id="forks-fork" title="session_op fork at the last message" onClick=${() => store.fork()}>Fork now</button></h2>
    ${cur ? html`<p class="meta" id="forks-session">Session <code>${cur.session_id}</code> · ${cur.entries} entries</p>` : null}
    ${err ? html`<p class="err">${err}</p>` : null}
    ${list && forks.length === 0 ? html`<p class="empty">No forks of this session.</p>` : null}
    <ul class="forks">${forks.map((f) => html`<${Fork} key=${f.fork_id} f=${f} source=${source} store=${store} />`)}</ul>
  </section>`;
}

/** The side panel. */
export function Side({ s, store }) {
  return html`<${Jobs} s=${s} store=${store} /><${Forks} s=${s} store=${store} /><${Workspaces} s=${s} store=${store} />`;
}
