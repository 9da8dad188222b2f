// Tool calls and results drawn from their render descriptors
// (docs/protocol.md §11: text, kv, diff, tree, progress, status, command,
// path_list, code), with exit code and duration from the structured
// tool_result fields. Unknown kinds fall back to the plain content: new kinds
// never break the page.

import { html } from "./html.js";
import { resultText } from "./transcript.js";
import { hlBlock } from "./highlight.js";
import { langOf } from "./syntax.js";
import { JobCard, jobCardData } from "./jobcard.js";

function diffLine(l) {
  const c = l[0] === "+" ? "add" : l[0] === "-" ? "del" : "ctx";
  return html`<div class=${"dl " + c}>${l}</div>`;
}

function tree(node) {
  return html`<li>${node.name}${node.children && node.children.length
    ? html`<ul>${node.children.map(tree)}</ul>` : null}</li>`;
}

/** Draws one render descriptor. */
export function Descriptor({ d }) {
  if (!d) return null;
  switch (d.kind) {
    case "text":
      return html`<pre class="r-text">${d.text}</pre>`;
    case "kv":
      return html`<dl class="r-kv">${(d.pairs || []).map((p) => html`<dt>${p.k}</dt><dd>${p.v}</dd>`)}</dl>`;
    case "diff":
      return html`<div class="r-diff" data-kind="diff"><div class="r-path">${d.path}</div>${(d.hunks || []).map((h) =>
        html`<div class="hunk"><div class="dl hdr">@@ -${h.old_start},${h.old_lines} +${h.new_start},${h.new_lines} @@</div>${(h.lines || []).map(diffLine)}</div>`)}</div>`;
    case "tree":
      return d.root ? html`<ul class="r-tree">${tree(d.root)}</ul>` : null;
    case "progress":
      return html`<div class="r-progress">${d.label} <progress value=${d.current} max=${d.total || undefined}></progress></div>`;
    case "status":
      return html`<div class=${"r-status tone-" + d.tone}>${d.label}</div>`;
    case "command":
      return html`<div class="r-command"><code>$ ${d.command}</code>${d.exitCode != null ? html` <span class="exit">exit ${d.exitCode}</span>` : null}</div>`;
    case "path_list":
      return html`<ul class="r-paths" data-kind="path_list">${(d.paths || []).map((p) =>
        html`<li class=${p.kind}><span class="p">${p.path}${p.kind === "dir" ? "/" : ""}</span>${p.hint ? html` <span class="hint">${p.hint}</span>` : null}</li>`)}</ul>`;
    case "code":
      return html`<div class="r-code" data-kind="code">${d.path ? html`<div class="r-path">${d.path}${d.lang ? " · " + d.lang : ""}</div>` : null}<pre><code>${hlBlock(d.text, langOf(d.lang ? "x." + d.lang : d.path))}</code></pre></div>`;
    default:
      return null;
  }
}

function argsLine(e) {
  const a = e.args;
  if (!a) return e.argsText || "";
  if (typeof a.command === "string") return a.command;
  if (typeof a.path === "string") return a.path;
  const s = JSON.stringify(a);
  return s.length > 160 ? s.slice(0, 157) + "…" : s;
}

// isJobResult: the subagent tool answered with the daemon's job data,
// drawn as a job card (jobcard.js) rather than as JSON.
function isJobResult(e) {
  const r = e.result;
  return e.name === "subagent" && !r.is_error && r.content && r.content.kind === "json" && !!jobCardData(r.content.value);
}

/** One tool call with its result. */
export function Tool({ e, pending }) {
  const r = e.result;
  const cls = "tool" + (e.readOnly ? " ro" : " rw") + (r && r.is_error ? " err" : "") + (r ? "" : " running");
  const footer = r && (r.exit_code != null || r.duration_ms != null)
    ? html`<div class="tool-foot">${r.exit_code != null ? html`<span class=${"exit" + (r.exit_code ? " bad" : "")}>exit ${r.exit_code}</span>` : null}${r.duration_ms != null ? html` <span>${r.duration_ms} ms</span>` : null}</div>` : null;
  return html`<div class=${cls} data-tool=${e.id} data-name=${e.name}>
    <div class="tool-head"><span class="glyph">${e.readOnly ? "◦" : "●"}</span> <b>${e.name}</b> <span class="args">${argsLine(e)}</span>${pending ? html` <span class="badge ask">awaiting permission</span>` : null}</div>
    ${e.render ? html`<div class="tool-call-render"><${Descriptor} d=${e.render} /></div>` : null}
    ${r ? html`<div class="tool-result">${r.render ? html`<${Descriptor} d=${r.render} />` : isJobResult(e) ? html`<${JobCard} value=${r.content.value} />` : html`<pre class="out">${resultText(r.content)}</pre>`}${footer}</div>` : null}
  </div>`;
}
