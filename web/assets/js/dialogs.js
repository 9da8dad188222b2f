// Permission and UI requests (docs/protocol.md §6.3, §9.5) as dialogs. Every
// browser attached interactively sees the same request; the first answer wins
// and permission_resolved / ui_resolved closes the dialog everywhere, leaving
// a note with the answer and who gave it. A delegated request keeps its
// child's agent_id and names the child.

import { useEffect, useRef, useState } from "../vendor/hooks.mjs";
import { html } from "./html.js";
import { agentLabel } from "./overview.js";

function permChoices(req) {
  if (req.choices && req.choices.length > 0) return req.choices.map((c) => ({ id: c.id, label: c.label, description: c.description, accelerator: c.accelerator, intent: c.intent }));
  const labels = { allow: "Allow", allow_always: "Always allow", deny: "Deny" };
  const keys = { allow: "y", allow_always: "a", deny: "n" };
  return (req.options || ["allow", "deny"]).map((o) => ({ decision: o, label: labels[o] || o, accelerator: keys[o], intent: o === "deny" ? "deny" : "allow" }));
}

function who(req, s) {
  if (!req.agent_id || req.agent_id === s.selected) return null;
  const c = s.agents[req.agent_id];
  const name = c ? agentLabel(c) : req.agent_id;
  return html`<p class="delegated">Asked by subagent <b>${name}</b></p>`;
}

/** A permission request: the server's choices (choice_id) or the legacy
 * options (decision), and an optional reason that goes with a refusal
 * (permission_response.reason, §9.5). */
export function Permission({ req, s, store }) {
  const ch = permChoices(req);
  const [sent, setSent] = useState(false);
  const [reason, setReason] = useState("");
  const ref = useRef(null);
  useEffect(() => { ref.current?.querySelector("button")?.focus(); }, []);
  const pick = (c) => { setSent(true); store.answerPermission(req, c, c.intent === "deny" ? reason.trim() : ""); };
  const onKey = (e) => {
    if (e.target instanceof HTMLElement && /^(INPUT|TEXTAREA)$/.test(e.target.tagName)) return; // typing a reason
    const c = ch.find((x) => x.accelerator && x.accelerator === e.key);
    if (c) { e.preventDefault(); pick(c); }
  };
  return html`<div class="dialog perm" role="dialog" aria-modal="false" aria-label="Permission request" data-request=${req.request_id} ref=${ref} onKeyDown=${onKey}>
    <h2>Permission: ${req.tool_name}</h2>
    ${who(req, s)}
    <p class="prompt">${req.prompt}</p>
    ${(req.details || []).map((d) => html`<div class=${"detail f-" + (d.format || "text")}>${d.label ? html`<span class="dlabel">${d.label}</span> ` : null}<code>${d.value}</code></div>`)}
    <div class="choices">${ch.map((c) => html`<button class=${"choice i-" + c.intent} data-choice=${c.id || c.decision} disabled=${sent}
        title=${c.description || ""} onClick=${() => pick(c)}>${c.label}${c.accelerator ? html` <kbd>${c.accelerator}</kbd>` : null}</button>`)}</div>
    ${ch.some((c) => c.intent === "deny") ? html`<input class="reason" aria-label="Reason for a refusal" placeholder="Why not? (optional, told to the agent with a refusal)"
        value=${reason} disabled=${sent} onInput=${(e) => setReason(e.target.value)}
        onKeyDown=${(e) => { if (e.key === "Enter") { const d = ch.find((c) => c.intent === "deny"); if (d) { e.preventDefault(); pick(d); } } }} />` : null}
  </div>`;
}

/** A UI request (§9.5) of any kind: select (one option, or with
 * `multiple` several, answered as string[]), confirm ("yes"/"no"), input,
 * editor (text), notify (acknowledged with null). */
export function UI({ req, s, store }) {
  const [v, setV] = useState(req.prefill || "");
  const [picked, setPicked] = useState([]);
  const [sent, setSent] = useState(false);
  const answer = (value) => { setSent(true); store.answerUI(req, value); };
  let body;
  switch (req.kind) {
    case "select":
      if (req.multiple === true) {
        const toggle = (o) => setPicked((p) => p.includes(o) ? p.filter((x) => x !== o) : [...p, o]);
        body = html`<form class="multi" onSubmit=${(e) => { e.preventDefault(); answer((req.options || []).filter((o) => picked.includes(o))); }}>
          ${(req.options || []).map((o) => html`<label class="opt"><input type="checkbox" data-option=${o} checked=${picked.includes(o)} disabled=${sent} onChange=${() => toggle(o)} /> ${o}</label>`)}
          <button type="submit" class="choice" data-choice="submit" disabled=${sent}>Submit${picked.length ? ` (${picked.length})` : ""}</button></form>`;
        break;
      }
      body = html`<div class="choices">${(req.options || []).map((o) => html`<button class="choice" data-choice=${o} disabled=${sent} onClick=${() => answer(o)}>${o}</button>`)}</div>`;
      break;
    case "confirm":
      body = html`<div class="choices"><button class="choice" data-choice="yes" disabled=${sent} onClick=${() => answer("yes")}>Yes</button><button class="choice" data-choice="no" disabled=${sent} onClick=${() => answer("no")}>No</button></div>`;
      break;
    case "notify":
      body = html`<div class="choices"><button class="choice" data-choice="ok" disabled=${sent} onClick=${() => answer(null)}>OK</button></div>`;
      break;
    default:
      body = html`<form onSubmit=${(e) => { e.preventDefault(); answer(v); }}>
        ${req.kind === "editor" ? html`<textarea rows="6" value=${v} onInput=${(e) => setV(e.target.value)}></textarea>`
          : html`<input value=${v} placeholder=${req.placeholder || ""} onInput=${(e) => setV(e.target.value)} />`}
        <button type="submit" class="choice" data-choice="submit" disabled=${sent}>Submit</button></form>`;
  }
  return html`<div class=${"dialog ui" + (req.notify_type ? " n-" + req.notify_type : "")} role="dialog" aria-label=${req.title || "Question"} data-request=${req.request_id}>
    <h2>${req.title || "Question"}</h2>${who(req, s)}${req.message ? html`<p>${req.message}</p>` : null}${body}
    <button class="cancel" disabled=${sent} onClick=${() => answer(null)}>Dismiss</button>
  </div>`;
}

/** The open requests of the selected agent (and its delegating children). */
export function Dialogs({ s, store }) {
  const reqs = s.transcript.pending;
  return html`<div class="dialogs" id="dialogs">
    ${reqs.map((r) => r.type === "ui_request"
      ? html`<${UI} key=${r.request_id} req=${r} s=${s} store=${store} />`
      : html`<${Permission} key=${r.request_id} req=${r} s=${s} store=${store} />`)}
    ${s.closed.map((c) => html`<div class=${"closed-note" + (c.notify ? " notice-note n-" + c.notify : "")} data-closed=${c.request_id}>${c.text}</div>`)}
  </div>`;
}
