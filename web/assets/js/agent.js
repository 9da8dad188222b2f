// The selected agent: its controls, its transcript (from sync, then live
// events) and the prompt box.

import { useEffect, useRef, useState } from "../vendor/hooks.mjs";
import { html } from "./html.js";
import { Tool } from "./render.js";

function fmtUsage(u) {
  if (!u) return "";
  let s = `${u.input} in · ${u.output} out`;
  if (u.cost) s += ` · $${u.cost.toFixed(4)}`;
  return s;
}

function Entry({ e, pendingTools }) {
  switch (e.kind) {
    case "message": {
      if (e.blocks.length === 0) return null;
      const note = e.dropped ? "dropped by the abort: not run" : e.queued ? "queued (" + e.queued.replace("_", "-") + ")" : "";
      return html`<div class=${"msg " + e.role + (e.complete ? "" : " streaming") + (e.queued ? " queued" : "") + (e.dropped ? " dropped" : "")} data-msg=${e.id}>
        ${e.blocks.map((b) => b.type === "thinking"
          ? html`<details class="thinking" open=${!e.complete}><summary>thinking</summary><div class="txt">${b.text}</div></details>`
          : html`<div class="txt">${b.text}</div>`)}
        ${note ? html`<div class="msg-note">${note}</div>` : null}
      </div>`;
    }
    case "tool":
      return html`<${Tool} e=${e} pending=${pendingTools.has(e.name) && !e.result} />`;
    case "turn":
      return html`<div class="turn-end" data-turn=${e.id}>turn done${e.usage ? " · " + fmtUsage(e.usage) : ""}</div>`;
    case "compaction":
      return html`<div class="compaction" data-compaction=${e.index}>── context compacted (#${e.index}): ${e.tokens_before} → ${e.tokens_after} tokens ──</div>`;
    case "error":
      return html`<div class="error-entry">${e.fatal ? "fatal " : ""}error ${e.code}: ${e.message}</div>`;
    default:
      return null;
  }
}

function Transcript({ t }) {
  const ref = useRef(null);
  const pendingTools = new Set(t.pending.filter((p) => p.type === "permission_request").map((p) => p.tool_name));
  useEffect(() => {
    const el = ref.current;
    if (el && el.scrollHeight - el.scrollTop - el.clientHeight < 200) el.scrollTop = el.scrollHeight;
  });
  return html`<div class="transcript" id="transcript" ref=${ref} aria-live="polite">
    ${t.items.map((e) => html`<${Entry} key=${e.id} e=${e} pendingTools=${pendingTools} />`)}
  </div>`;
}

// isLineBreak: the input types a textarea gets for Enter.
const isLineBreak = (inputType) => inputType === "insertLineBreak" || inputType === "insertParagraph";

function PromptBox({ s, store }) {
  const [text, setText] = useState("");
  const box = useRef(null);
  // sendKey: the last keydown was an Enter that sends. Its line break must
  // never reach the box, and preventDefault on the keydown does not stop
  // one delivered apart from it (Chromium's DevTools input sends the key's
  // text as a separate event): when the prompt's answer has cleared the
  // box before that text arrives, the "\n" would lead the next prompt.
  // The line break still arrives as beforeinput, which can be refused.
  const sendKey = useRef(false);
  useEffect(() => {
    const el = box.current;
    const onBeforeInput = (e) => { if (sendKey.current && isLineBreak(e.inputType)) e.preventDefault(); };
    el.addEventListener("beforeinput", onBeforeInput);
    return () => el.removeEventListener("beforeinput", onBeforeInput);
  }, []);
  const busy = s.transcript.status !== "idle" && s.transcript.status !== "error";
  const go = (behavior) => {
    const v = text;
    store.send(v, behavior).then((ok) => { if (ok) setText(""); });
  };
  const onKey = (e) => {
    sendKey.current = e.key === "Enter" && !e.shiftKey;
    if (sendKey.current) {
      e.preventDefault();
      go(busy ? (e.ctrlKey || e.metaKey ? "steer" : "follow_up") : undefined);
    } else if (e.key === "Escape" && busy) {
      store.abort();
    }
  };
  return html`<div class="promptbox">
    <textarea id="prompt" ref=${box} rows="3" aria-label="Prompt" placeholder=${busy ? "Enter: follow-up · Ctrl+Enter: steer · Esc: abort" : "Message (Enter sends, Shift+Enter newline)"}
      value=${text} onInput=${(e) => setText(e.target.value)} onKeyDown=${onKey}></textarea>
    <div class="pbtns">
      ${busy
        ? html`<button id="steer" onClick=${() => go("steer")}>Steer</button><button id="follow-up" onClick=${() => go("follow_up")}>Follow-up</button><button id="abort" class="danger" onClick=${() => store.abort()}>Abort</button>`
        : html`<button id="send" class="primary" onClick=${() => go()}>Send</button>`}
    </div>
  </div>`;
}

/** The selected agent's view. */
export function AgentView({ s, store }) {
  const a = s.agents[s.selected] || { agent_id: s.selected };
  const t = s.transcript;
  const caps = t.capabilities || [];
  const canMode = s.modes.length > 0 && (caps.length === 0 || caps.includes("mode-switch"));
  const canModel = s.models.length > 0 && caps.includes("model-switch");
  return html`<section class="agentview" data-selected=${s.selected} data-status=${t.status}>
    <header class="ahead">
      <h1>${a.display_name || a.name || a.agent_id}</h1>
      <span id="agent-status" class=${"status st-" + t.status}>${t.status}</span>
      <span class="meta">${a.cwd}${t.usage.cost ? " · $" + t.usage.cost.toFixed(4) : ""}${t.usage.input ? ` · ${t.usage.input}/${t.usage.output} tokens` : ""}</span>
      <span class="grow"></span>
      ${canMode ? html`<label>Mode <select id="mode" value=${t.mode} onChange=${(e) => store.setMode(e.target.value)}>
        ${s.modes.map((m) => html`<option value=${m.name} title=${m.description}>${m.name}</option>`)}</select></label>` : html`<span class="mode">${t.mode}</span>`}
      ${canModel ? html`<label>Model <select id="model" value=${(s.models.find((m) => m.id === t.model || m.model === t.model) || {}).id || a.model}
          onChange=${(e) => store.setModel(e.target.value)}>
        ${s.models.map((m) => html`<option value=${m.id}>${m.provider}/${m.model}</option>`)}</select></label>` : null}
      <button id="compact" onClick=${() => store.compact()} title="session_op compact">Compact</button>
      <button id="fork" onClick=${() => store.fork()} title="session_op fork at the last message">Fork</button>
      <button id="terminate" onClick=${() => store.terminate(s.selected)}>Terminate</button>
      <button id="kill" class="danger" onClick=${() => { if (confirm("Kill this agent's runtime now?")) store.kill(s.selected); }}>Kill</button>
    </header>
    <${Transcript} t=${t} />
    <${PromptBox} s=${s} store=${store} />
  </section>`;
}
