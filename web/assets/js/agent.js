// The selected agent: its controls, its transcript (from sync, then live
// events) and the prompt box.

import { useEffect, useRef, useState } from "../vendor/hooks.mjs";
import { html } from "./html.js";
import { Tool } from "./render.js";
import { Thumb, checkAdd, isImageType, readImage } from "./images.js";
import { agentLabel } from "./overview.js";

function fmtUsage(u) {
  if (!u) return "";
  let s = `${u.input} in · ${u.output} out`;
  if (u.cost) s += ` · $${u.cost.toFixed(4)}`;
  return s;
}

/** A token count, short: 950, 12.3k, 1.2M. */
export function fmtTokens(n) {
  if (!n) return "0";
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1000).toFixed(n < 1e4 ? 1 : 0) + "k";
  return (n / 1e6).toFixed(1) + "M";
}

/**
 * contextFill is how full the context is: the tokens the last provider
 * call (or compaction) reported against the active model's window, or null
 * when either is unknown.
 */
export function contextFill(tokens, window) {
  if (!tokens || !window) return null;
  return { tokens, window, pct: Math.min(100, Math.round((tokens / window) * 100)) };
}

/** One transcript entry. */
export function Entry({ e, pendingTools }) {
  switch (e.kind) {
    case "message": {
      const note = e.dropped ? "dropped by the abort: not run" : e.queued ? "queued (" + e.queued.replace("_", "-") + ")" : "";
      const imgs = e.images || [];
      if (e.blocks.length === 0 && imgs.length === 0) return null;
      return html`<div class=${"msg " + e.role + (e.complete ? "" : " streaming") + (e.queued ? " queued" : "") + (e.dropped ? " dropped" : "")} data-msg=${e.id}>
        ${imgs.length > 0 ? html`<div class="msg-imgs">${imgs.map((im, i) => html`<${Thumb} key=${i} im=${im} cls="msg-img" alt=${"image " + (i + 1)} />`)}</div>` : null}
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

/** The prompt box: text, attached images (picked, pasted or dropped, shown
 * as removable thumbnails until sent), and the send, steer, follow-up and
 * abort buttons. */
export function PromptBox({ s, store }) {
  const [text, setText] = useState("");
  const [images, setImages] = useState([]);
  const [over, setOver] = useState(false);
  const box = useRef(null);
  const picker = useRef(null);
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
  // The attachments belong to the agent they were meant for.
  useEffect(() => setImages([]), [s.selected]);
  const attach = (files) => {
    files = [...files];
    if (files.length === 0) return;
    const why = checkAdd(images, files);
    if (why) { store.note("image: " + why); return; }
    Promise.all(files.map(readImage)).then((read) => setImages((have) => [...have, ...read]), (e) => store.note("image: " + e.message));
  };
  const busy = s.transcript.status !== "idle" && s.transcript.status !== "error";
  // Shard's runtimes say "image-input" while the active model takes images
  // (docs/protocol.md §13 P4) and refuse images otherwise (UNSUPPORTED).
  // The page still lets a person attach them, with a warning, and keeps
  // them when the prompt is refused: the daemon's answer is the authority,
  // and a runtime that predates the capability takes the prompt.
  const takesImages = (s.transcript.capabilities || []).includes("image-input");
  const go = (behavior) => {
    const v = text, ims = images;
    store.send(v, behavior, ims).then((ok) => {
      if (!ok) return;
      setText("");
      setImages((have) => have.filter((x) => !ims.includes(x)));
    });
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
  const imageFiles = (dt) => [...((dt && dt.files) || [])].filter((f) => isImageType(f.type));
  const onPaste = (e) => {
    const files = imageFiles(e.clipboardData);
    if (files.length === 0) return; // text pastes as text
    e.preventDefault();
    attach(files);
  };
  const onDragOver = (e) => {
    if (![...((e.dataTransfer && e.dataTransfer.types) || [])].includes("Files")) return;
    e.preventDefault();
    setOver(true);
  };
  const onDrop = (e) => {
    setOver(false);
    const files = imageFiles(e.dataTransfer);
    if (files.length === 0) return;
    e.preventDefault();
    attach(files);
  };
  return html`<div class=${"promptbox" + (over ? " drop" : "")} id="promptbox" onDragOver=${onDragOver} onDragLeave=${() => setOver(false)} onDrop=${onDrop}>
    <div class="pmain">
      ${images.length > 0 ? html`<ul class="thumbs" id="thumbs" aria-label="Images to send">${images.map((im) => html`<li class="thumb" key=${im.id} data-image=${im.name}>
          <${Thumb} im=${im} cls="thumb-img" alt=${im.name} />
          <button class="remove" title=${"Remove " + im.name} aria-label=${"Remove " + im.name} onClick=${() => setImages((have) => have.filter((x) => x !== im))}>×</button></li>`)}</ul>` : null}
      <textarea id="prompt" ref=${box} rows="3" aria-label="Prompt" placeholder=${busy ? "Enter: follow-up · Ctrl+Enter: steer · Esc: abort" : "Message (Enter sends, Shift+Enter newline; paste or drop images)"}
        value=${text} onInput=${(e) => setText(e.target.value)} onKeyDown=${onKey} onPaste=${onPaste}></textarea>
    </div>
    <div class="pbtns">
      ${busy
        ? html`<button id="steer" onClick=${() => go("steer")}>Steer</button><button id="follow-up" onClick=${() => go("follow_up")}>Follow-up</button><button id="abort" class="danger" onClick=${() => store.abort()}>Abort</button>`
        : html`<button id="send" class="primary" onClick=${() => go()}>Send</button>`}
      <button id="attach" class=${takesImages ? "" : "warn"} title=${takesImages ? "Attach images (or paste, or drop them here)"
          : "The active model does not say it takes images (no image-input capability): the daemon may refuse a prompt with images"} onClick=${() => picker.current && picker.current.click()}>Image…</button>
      <input id="attach-input" type="file" accept="image/png,image/jpeg,image/gif,image/webp" multiple hidden ref=${picker}
        onChange=${(e) => { attach(e.target.files); e.target.value = ""; }} />
    </div>
  </div>`;
}

/** The agent's title, with its id secondary, and the rename control
 * (agent.update {agent_id, title}, docs/protocol.md §10.1). */
export function Title({ a, store }) {
  const [edit, setEdit] = useState(null);
  const label = agentLabel(a);
  if (edit !== null) {
    const save = () => store.rename(a.agent_id, edit.trim()).then((ok) => { if (ok) setEdit(null); });
    return html`<form class="rename" id="rename-form" onSubmit=${(e) => { e.preventDefault(); save(); }}>
      <input id="title-input" aria-label="Title" value=${edit} placeholder=${a.agent_id} autofocus
        onInput=${(e) => setEdit(e.target.value)} onKeyDown=${(e) => { if (e.key === "Escape") { e.preventDefault(); setEdit(null); } }} />
      <button type="submit" id="title-save">Save</button><button type="button" onClick=${() => setEdit(null)}>Cancel</button></form>`;
  }
  return html`<span class="titlebox"><h1 id="agent-title" title=${a.agent_id}>${label}</h1>
    ${label !== a.agent_id ? html`<code class="aid" id="agent-id">${a.agent_id}</code>` : null}
    <button id="rename" class="quiet" title="Rename" onClick=${() => setEdit(a.title || "")}>Rename</button></span>`;
}

/** The model picker: every model of every provider the runtime lists,
 * grouped by provider when there are several, shown as provider · model. */
export function ModelPicker({ s, t, a, store }) {
  const cur = (s.activeModel && s.activeModel.id) || (s.models.find((m) => m.id === t.model || m.model === t.model) || {}).id || a.model;
  const providers = [];
  for (const m of s.models) if (!providers.includes(m.provider)) providers.push(m.provider);
  const opt = (m) => html`<option value=${m.id} title=${m.id}>${m.provider} · ${m.model}</option>`;
  return html`<label>Model <select id="model" value=${cur} onChange=${(e) => store.setModel(e.target.value)}>
    ${providers.length > 1
      ? providers.map((p) => html`<optgroup label=${p}>${s.models.filter((m) => m.provider === p).map(opt)}</optgroup>`)
      : s.models.map(opt)}</select></label>`;
}

function Reasoning({ r, store }) {
  return html`<label>Reasoning <select id="reasoning" value=${r.active} title=${(r.levels.find((l) => l.id === r.active) || {}).description || ""}
      onChange=${(e) => store.setReasoning(e.target.value)}>
    ${r.levels.map((l) => html`<option value=${l.id} title=${l.description || ""}>${l.label || l.id}</option>`)}</select></label>`;
}

function Usage({ u, fill }) {
  return html`${u && (u.input || u.output) ? html`<span id="agent-usage" class="usage" title="tokens in / out over the agent's life">${fmtTokens(u.input)} in · ${fmtTokens(u.output)} out${u.cost ? " · $" + u.cost.toFixed(4) : ""}</span>` : null}
    ${fill ? html`<span id="context-fill" class=${"ctx" + (fill.pct >= 80 ? " hot" : "")} data-tokens=${fill.tokens} data-window=${fill.window}
        title=${`context: ${fill.tokens} of ${fill.window} tokens`}>
      <meter class="ctxbar" min="0" max=${fill.window} high=${fill.window * 0.8} value=${fill.tokens}></meter>
      ctx ${fmtTokens(fill.tokens)}/${fmtTokens(fill.window)} (${fill.pct}%)</span>` : null}`;
}

/** The selected agent's view. */
export function AgentView({ s, store }) {
  const a = s.agents[s.selected] || { agent_id: s.selected };
  const t = s.transcript;
  const caps = t.capabilities || [];
  const canMode = s.modes.length > 0 && (caps.length === 0 || caps.includes("mode-switch"));
  const canModel = s.models.length > 0 && caps.includes("model-switch");
  const r = s.reasoning;
  const canReasoning = !!r && r.levels.length > 0 && caps.includes("reasoning-switch");
  const usage = agentUsage(a, t);
  const window = (s.activeModel && s.activeModel.context_window) || (s.models.find((m) => m.id === t.model || m.model === t.model) || {}).context_window;
  const fill = contextFill(t.usage.context_tokens || (a.usage && a.usage.context_tokens), window);
  const exited = a.exit && a.runtime_state !== "running" ? a.exit : null;
  return html`<section class="agentview" data-selected=${s.selected} data-status=${t.status} data-catalog-epoch=${s.catalogEpoch ?? ""}>
    <header class="ahead">
      <${Title} a=${a} store=${store} />
      <span id="agent-status" class=${"status st-" + t.status}>${t.status}</span>
      <span class="meta">${a.cwd}</span>
      ${runsOn(a) ? html`<span id="agent-model" class="meta model" title="the provider and model the agent runs (AgentInfo)" data-provider=${a.provider || ""} data-model=${a.model || ""}>${runsOn(a)}</span>` : null}
      ${a.mcp_servers && a.mcp_servers.length ? html`<span id="agent-mcp" class="meta mcp" title="MCP servers whose tools the agent is offered as name__tool (AgentInfo.mcp_servers)">MCP: ${a.mcp_servers.join(", ")}</span>` : null}
      <${Usage} u=${usage} fill=${fill} />
      <span class="grow"></span>
      ${canMode ? html`<label>Mode <select id="mode" value=${t.mode} onChange=${(e) => store.setMode(e.target.value)}>
        ${s.modes.map((m) => html`<option value=${m.name} title=${m.description}>${m.name}</option>`)}</select></label>` : html`<span class="mode">${t.mode}</span>`}
      ${canModel ? html`<${ModelPicker} s=${s} t=${t} a=${a} store=${store} />` : null}
      ${canReasoning ? html`<${Reasoning} r=${r} store=${store} />` : null}
      <button id="compact" onClick=${() => store.compact()} title="session_op compact">Compact</button>
      <button id="fork" onClick=${() => store.fork()} title="session_op fork at the last message">Fork</button>
      <button id="terminate" onClick=${() => store.terminate(s.selected)}>Terminate</button>
      <button id="kill" class="danger" onClick=${() => { if (confirm("Kill this agent's runtime now?")) store.kill(s.selected); }}>Kill</button>
    </header>
    ${exited ? html`<div id="agent-exit" class="exit-note" role="status">Runtime exited: ${exited.reason || "no reason given"}${exited.exit_code !== undefined && exited.exit_code !== null ? ` (exit code ${exited.exit_code})` : ""}. It restarts on the next prompt.</div>` : null}
    <${Transcript} t=${t} />
    <${PromptBox} s=${s} store=${store} />
  </section>`;
}

/** runsOn names what an agent runs, "provider · model" (AgentInfo
 * provider/model, which follow model_changed), or "" when unknown. */
export function runsOn(a) {
  if (!a || !a.model) return "";
  return (a.provider ? a.provider + " · " : "") + a.model;
}

/**
 * agentUsage is the agent's usage totals: the daemon's (AgentInfo.usage,
 * which outlives a reload) as the store keeps them, else what this page saw
 * live.
 */
export function agentUsage(a, t) {
  const u = a && a.usage;
  if (u && (u.input || u.output)) return u;
  return t.usage.input || t.usage.output ? t.usage : null;
}
