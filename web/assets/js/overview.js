// The agent overview: every agent with its live status and activity
// (agent_activity carries phase and tool name, never content), grouped so
// that agents needing input come first, and the create form.

import { useState } from "../vendor/hooks.mjs";
import { html } from "./html.js";
import { groupAgents } from "./store.js";
import { needsInput } from "./transcript.js";
import { createWorkspace } from "./orch.js";
import { NodeBadge, clustered, remoteNode } from "./cluster.js";

function cost(u) {
  if (!u || !u.cost) return "";
  return "$" + u.cost.toFixed(u.cost < 1 ? 4 : 2);
}

/** The name an agent is shown by: its title (AgentInfo.title, additive),
 * else its display name or name, else its id. */
export function agentLabel(a) {
  return (a && (a.title || a.display_name || a.name || a.agent_id)) || "";
}

function Row({ a, s, store }) {
  const act = a.activity;
  const phase = act ? act.phase + (act.tool_name ? " · " + act.tool_name : "") : a.status;
  const sel = s.selected === a.agent_id;
  const label = agentLabel(a);
  const remote = remoteNode(a, s.cluster, s.elsewhere);
  return html`<li class=${"agent" + (sel ? " sel" : "") + (needsInput(a.status) ? " needs" : "") + (remote ? " remote" : "")} data-agent=${a.agent_id}
      data-status=${a.status} data-node=${a.node || ""}>
    <button class="pick" aria-current=${sel ? "true" : undefined} onClick=${() => store.select(a.agent_id)}>
      <span class=${"dot st-" + a.status}></span>
      <span class="name" title=${a.agent_id}>${label}</span>
      <span class="phase">${phase}</span>
      ${needsInput(a.status) ? html`<span class="badge ask">needs input</span>` : null}
      <${NodeBadge} a=${a} remote=${remote} st=${s.cluster} />
      ${label !== a.agent_id ? html`<span class="aid">${a.agent_id}</span>` : null}
      ${a.exit && a.runtime_state !== "running" ? html`<span class="exit" title="agent_exited">exited: ${a.exit.reason || "?"}</span>` : null}
      <span class="meta">${a.cwd}${a.model ? " · " + (a.provider ? a.provider + "/" : "") + a.model : ""}${a.mode ? " · " + a.mode : ""}${cost(a.usage) ? " · " + cost(a.usage) : ""}${a.runtime_state && a.runtime_state !== "running" ? " · " + a.runtime_state : ""}${sel && !s.elsewhere[a.agent_id] ? " · attached here (interactive)" : ""}</span>
      ${a.attached_clients === undefined ? null : html`<span class="clients" title="attached clients">${a.attached_clients} attached</span>`}
    </button>
  </li>`;
}

function Group({ title, list, s, store, id }) {
  if (list.length === 0) return null;
  return html`<section class="group" id=${id}><h2>${title} <span class="count">${list.length}</span></h2>
    <ul class="agents">${list.map((a) => html`<${Row} key=${a.agent_id} a=${a} s=${s} store=${store} />`)}</ul></section>`;
}

/** The agent list. */
export function Overview({ s, store }) {
  const g = groupAgents(s.agents);
  if (g.needs.length + g.working.length + g.rest.length === 0) return html`<p class="empty">No agents yet.</p>`;
  return html`<div id="overview">
    <${Group} id="g-needs" title="Needs input" list=${g.needs} s=${s} store=${store} />
    <${Group} id="g-working" title="Working" list=${g.working} s=${s} store=${store} />
    <${Group} id="g-rest" title="Idle and stopped" list=${g.rest} s=${s} store=${store} />
  </div>`;
}

/**
 * defaultModel is the id the create forms preselect: the catalog's default
 * when it lists it, else its first model, else "" (nothing to pick).
 */
export function defaultModel(catalog) {
  const ms = (catalog && catalog.models) || [];
  const d = catalog && catalog.default;
  if (d && ms.some((m) => m.id === d.id)) return d.id;
  return ms.length ? ms[0].id : "";
}

/**
 * ModelChoice is a create form's model field: the daemon's catalog
 * (models.list) as a picker, grouped by provider when there are several and
 * labelled "provider · model", whose value is the descriptor id (an id names
 * its provider, docs/protocol.md §13). With no catalog (an empty one, or a
 * daemon without models.list) it is a text field for a model id or name.
 */
export function ModelChoice({ id, catalog, value, onChange }) {
  const ms = (catalog && catalog.models) || [];
  if (ms.length === 0) {
    return html`<label>Model <input id=${id} placeholder="default" value=${value} onInput=${(e) => onChange(e.target.value)} /></label>`;
  }
  const d = defaultModel(catalog);
  const providers = [];
  for (const m of ms) if (!providers.includes(m.provider)) providers.push(m.provider);
  const opt = (m) => html`<option value=${m.id} title=${m.id}>${m.provider} · ${m.model}${m.id === d ? " (default)" : ""}</option>`;
  return html`<label>Model <select id=${id} value=${value || d} onChange=${(e) => onChange(e.target.value)}>
    ${providers.length > 1
      ? providers.map((p) => html`<optgroup label=${p}>${ms.filter((m) => m.provider === p).map(opt)}</optgroup>`)
      : ms.map(opt)}</select></label>`;
}

/** modelField is the model a create form sends: the person's pick, else
 * the catalog's default (preselected), else nothing (the daemon's). */
export function modelField(picked, catalog) {
  return picked || defaultModel(catalog);
}

/**
 * splitWords splits a command line at unquoted blanks, as shardctl's --mcp
 * does: "..." and '...' group, and a backslash outside '...' takes the next
 * character as it is. Nothing is expanded. An unclosed quote or a trailing
 * backslash throws.
 */
export function splitWords(s) {
  const words = [];
  let cur = "", inWord = false, quote = "", esc = false;
  for (const c of s) {
    if (esc) { cur += c; esc = false; }
    else if (c === "\\" && quote !== "'") { esc = true; inWord = true; }
    else if (quote && c === quote) quote = "";
    else if (quote) cur += c;
    else if (c === '"' || c === "'") { quote = c; inWord = true; }
    else if (c === " " || c === "\t" || c === "\n") { if (inWord) { words.push(cur); cur = ""; inWord = false; } }
    else { cur += c; inWord = true; }
  }
  if (esc) throw new Error("a trailing backslash");
  if (quote) throw new Error("an unclosed " + quote);
  if (inWord) words.push(cur);
  return words;
}

/**
 * mcpServersField turns the form's MCP rows ({name, target}) into
 * agent.create mcp_servers (docs/protocol.md §10.1): an http(s) URL is a
 * streamable HTTP server, anything else a command line of a stdio server.
 * Blank rows are skipped; undefined when none is left. A row that cannot
 * be a server throws an Error saying which and why; the daemon checks the
 * rest (the name's characters). Env and headers are not on the form: they
 * may be secrets, which belong in the config or shardctl's --mcp-env.
 */
export function mcpServersField(rows) {
  const out = {};
  for (const r of rows || []) {
    const name = (r.name || "").trim(), target = (r.target || "").trim();
    if (!name && !target) continue;
    if (!name) throw new Error("MCP server: a name for " + target);
    if (!target) throw new Error("MCP server " + name + ": a command or an http(s) URL");
    if (out[name]) throw new Error("MCP server " + name + " is there twice");
    if (/^https?:\/\//.test(target)) {
      if (/\s/.test(target)) throw new Error("MCP server " + name + ": a URL takes no arguments");
      out[name] = { url: target };
      continue;
    }
    let words;
    try { words = splitWords(target); } catch (e) { throw new Error("MCP server " + name + ": " + e.message); }
    out[name] = words.length > 1 ? { command: words[0], args: words.slice(1) } : { command: words[0] };
  }
  return Object.keys(out).length ? out : undefined;
}

/**
 * The new-agent form. Isolation "none" starts the agent in the directory
 * (agent.create); "workspace" makes a workspace of the repository there —
 * a new worktree on a new branch — and starts the agent in it
 * (workspace.create, docs/protocol.md §10.1a), with the branch, its base
 * and its integration target when given (the daemon picks them otherwise).
 */
export function CreateForm({ s, store }) {
  const [f, setF] = useState({ cwd: "", name: "", model: "", mode: "", tools: "", skills: "", mcp: [], isolation: "none", label: "", branch: "", base_ref: "", integration_target: "", node: "" });
  const [err, setErr] = useState("");
  const on = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const catalog = s && s.catalog;
  // In a cluster the agent may go to another alive node (agent.create
  // node, docs/protocol.md §13 "Agents of other nodes"); a workspace is
  // made on the page's node.
  const nodes = clustered(s && s.cluster) ? s.cluster.nodes.filter((n) => !n.self && n.health === "alive").map((n) => n.node) : [];
  const submit = (e) => {
    e.preventDefault();
    if (!f.cwd) return;
    setErr("");
    const fields = { ...f, model: modelField(f.model, catalog) };
    if (f.isolation === "workspace") {
      createWorkspace(store, fields).then((r) => {
        if (r.ok) setF({ ...f, name: "", label: "", branch: "" }); else setErr(r.text);
      });
      return;
    }
    try { fields.mcp_servers = mcpServersField(f.mcp); } catch (x) { setErr(x.message); return; }
    // A node chosen earlier that is no longer offered (not alive now) is
    // not sent: the form shows "this node" then.
    if (!nodes.includes(fields.node)) delete fields.node;
    store.create(fields).then(() => setF({ ...f, name: "" }), () => {});
  };
  const ws = f.isolation === "workspace";
  const setRow = (i, k) => (e) => setF({ ...f, mcp: f.mcp.map((r, j) => (j === i ? { ...r, [k]: e.target.value } : r)) });
  return html`<form class="create" id="create" onSubmit=${submit}>
    <h2>New agent</h2>
    <label>${ws ? "Repository" : "Directory"} <input id="create-cwd" required placeholder="/path/to/project" value=${f.cwd} onInput=${on("cwd")} /></label>
    <label>Isolation <select id="create-isolation" value=${f.isolation} onChange=${on("isolation")}>
      <option value="none">none: work in this directory</option>
      <option value="workspace">workspace: a new worktree and branch</option></select></label>
    ${ws ? html`<fieldset class="create-ws">
      <label>Branch <input id="create-branch" placeholder="generated" value=${f.branch} onInput=${on("branch")} /></label>
      <label>Base <input id="create-base" placeholder="HEAD" value=${f.base_ref} onInput=${on("base_ref")} /></label>
      <label>Merge into <input id="create-target" placeholder="the checked-out branch" value=${f.integration_target} onInput=${on("integration_target")} /></label>
      <label>Label <input id="create-label" value=${f.label} onInput=${on("label")} /></label>
    </fieldset>` : null}
    ${nodes.length && !ws ? html`<label>Node <select id="create-node" title="The node that hosts the agent: its runtime runs there and the directory is a path on it (agent.create node)" value=${f.node} onChange=${on("node")}>
      <option value="">this node (${s.cluster.node})</option>
      ${nodes.map((n) => html`<option value=${n}>${n}</option>`)}</select></label>` : null}
    <label>Name <input id="create-name" value=${f.name} onInput=${on("name")} /></label>
    <${ModelChoice} id="create-model" catalog=${catalog} value=${f.model} onChange=${(v) => setF({ ...f, model: v })} />
    <label>Mode <input id="create-mode" placeholder="default" value=${f.mode} onInput=${on("mode")} /></label>
    ${ws ? null : html`<label>Tools <input id="create-tools" placeholder="all (or e.g. read,ls,grep)" title="Limit the agent to these tools, comma-separated" value=${f.tools} onInput=${on("tools")} /></label>
      <label>Skills <input id="create-skills" placeholder="none" title="Skills to load (.shard/skills, .agents/skills, .claude/skills or $SHARD_HOME/skills), comma-separated" value=${f.skills} onInput=${on("skills")} /></label>
      <fieldset class="create-mcp" id="create-mcp"><legend title="Servers whose tools the agent is offered as name__tool (docs/protocol.md §10.1)">MCP servers</legend>
        ${f.mcp.map((r, i) => html`<div class="mcp-row">
          <input class="create-mcp-name" aria-label="MCP server name" placeholder="name" value=${r.name} onInput=${setRow(i, "name")} />
          <input class="create-mcp-target" aria-label="MCP server command or URL" placeholder="command args… or https://…/mcp" value=${r.target} onInput=${setRow(i, "target")} />
          <button type="button" class="create-mcp-rm" title="Remove this server" onClick=${() => setF({ ...f, mcp: f.mcp.filter((_, j) => j !== i) })}>×</button></div>`)}
        <button type="button" id="create-mcp-add" onClick=${() => setF({ ...f, mcp: [...f.mcp, { name: "", target: "" }] })}>Add MCP server</button>
      </fieldset>`}
    <button type="submit" id="create-go">${ws ? "Create workspace" : "Create"}</button>
    ${err ? html`<p class="err" id="create-err">${err}</p>` : null}
  </form>`;
}
