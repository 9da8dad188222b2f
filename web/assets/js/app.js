// The dashboard's entry: mounts the views on the store and wires the
// keyboard. The page's only script (no inline code: the CSP forbids it).

import { render } from "../vendor/preact.mjs";
import { useEffect, useState } from "../vendor/hooks.mjs";
import { html } from "./html.js";
import { Store, State } from "./store.js";
import { PROTOCOL_MAJOR } from "./conn.js";
import { Overview, CreateForm } from "./overview.js";
import { AgentView } from "./agent.js";
import { Dialogs } from "./dialogs.js";
import { Side } from "./side.js";
import { StoreCtx } from "./ctx.js";
import { ViewNav, TeamView } from "./teamview.js";
import { openDecisions } from "./team.js";
import { ClusterChip, RemoteAgent, Moved } from "./cluster.js";

// useStore follows the store's state. The effect subscribes after the
// first paint, and the store may change before it (store.start() runs at
// once: a fast 401 from /bootstrap lands in between), so it catches up
// with the state as it subscribes; otherwise that change is never seen.
function useStore(store) {
  const [s, set] = useState(store.state);
  useEffect(() => {
    const off = store.subscribe(set);
    set(store.state);
    return off;
  }, [store]);
  return s;
}

function Banner({ s, store }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (s.conn !== State.reconnecting) return undefined;
    const t = setInterval(() => setNow(Date.now()), 500);
    return () => clearInterval(t);
  }, [s.conn]);
  if (s.conn === State.online) return null;
  let text = "Connecting…";
  if (s.conn === State.moving) text = `Node ${s.connInfo.from} is gone. Moving to node ${s.connInfo.to}'s dashboard…`;
  if (s.conn === State.reconnecting) {
    const left = s.connInfo.at ? Math.max(0, Math.ceil((s.connInfo.at - now) / 1000)) : 0;
    text = left > 0 ? `Disconnected (${s.connInfo.reason || "connection lost"}). Reconnecting in ${left} s…` : "Reconnecting…";
  }
  return html`<div id="banner" class=${"banner " + s.conn} role="status" aria-live="polite">${text}
    ${s.conn === State.reconnecting ? html` <button onClick=${() => store.conn.retryNow()}>Retry now</button>` : null}</div>`;
}

function SignIn({ s }) {
  const revoked = s.conn === State.signedOut;
  return html`<main id="signin" class="signin">
    <h1>${revoked ? "Signed out" : "Enroll this browser"}</h1>
    ${revoked
      ? html`<p id="signin-reason">This browser's session is no longer valid (${s.connInfo.reason || "revoked or expired"}).</p>`
      : html`<p id="signin-reason">This browser is not enrolled with this Shard daemon yet.</p>`}
    ${s.movedFrom ? html`<p id="signin-moved">Node ${s.movedFrom} is gone, and its page moved here, to another node of its cluster (${location.host}).
      Each node enrolls browsers on its own: enroll this browser here too.</p>` : null}
    <ol>
      <li>On the machine running <code>shardd</code>, run <code>shardctl web enroll</code>.</li>
      <li>Open the link it prints in this browser within five minutes. The link works once.</li>
      <li>Come back to this page.</li>
    </ol>
    <p><button id="signin-retry" onClick=${() => location.reload()}>I have enrolled: reload</button></p>
  </main>`;
}

// Incompatible: the daemon's hello names a protocol major version this page
// does not speak (docs/protocol.md §7). The page has disconnected.
function Incompatible({ s }) {
  const h = s.connInfo.hello || {};
  return html`<main id="incompatible" class="signin" role="alert">
    <h1>This page cannot talk to this daemon</h1>
    <p id="incompatible-reason">The daemon speaks protocol version <b>${h.protocol_version || "(none given)"}</b>${h.server_version ? html` (shardd ${h.server_version})` : null};
      this page speaks ${PROTOCOL_MAJOR}.x. The page has disconnected: nothing was sent to the daemon.</p>
    <p>Use the page served by a shardd of the same protocol version: upgrade or downgrade shardd or this page so that their major versions match, then reload.</p>
    <p><button onClick=${() => location.reload()}>Reload</button></p>
  </main>`;
}

function Theme() {
  const [theme, setTheme] = useState(() => localStorage.getItem("shard.theme") || "auto");
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    localStorage.setItem("shard.theme", theme);
  }, [theme]);
  const next = { auto: "dark", dark: "light", light: "auto" }[theme] || "auto";
  return html`<button id="theme" title="Theme (t)" onClick=${() => setTheme(next)}>Theme: ${theme}</button>`;
}

// The tab's title counts the decisions waiting on a person, so a page in a
// background tab says so too.
function useTitle(s) {
  const n = openDecisions(s.team).length;
  useEffect(() => { document.title = n > 0 ? "(" + n + ") Shard" : "Shard"; }, [n]);
}

function App({ store }) {
  const s = useStore(store);
  useTitle(s);
  useEffect(() => {
    const onKey = (e) => {
      if (e.target instanceof HTMLElement && /^(INPUT|TEXTAREA|SELECT)$/.test(e.target.tagName)) {
        if (e.key === "Escape") e.target.blur();
        return;
      }
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const ids = [...document.querySelectorAll("[data-agent]")].map((el) => el.dataset.agent);
      const i = ids.indexOf(store.state.selected);
      if (e.key === "j" || e.key === "k") {
        const n = ids[Math.max(0, Math.min(ids.length - 1, i + (e.key === "j" ? 1 : -1)))];
        if (n) store.select(n);
      } else if (e.key === "/" || e.key === "i") {
        const p = document.getElementById("prompt");
        if (p) { e.preventDefault(); p.focus(); }
      } else if (e.key === "Escape" && store.state.diff) {
        store.set({ diff: null });
      } else if (e.key === "v") {
        store.setView(store.state.view === "team" ? "agents" : "team");
      } else if (e.key === "t") {
        document.getElementById("theme")?.click();
      } else if (e.key === "n") {
        // the new-agent form, or on the team view the goal's text
        const c = document.getElementById("create-cwd") || document.getElementById("team-goal-text");
        if (c) { e.preventDefault(); c.focus(); }
      } else if (e.key === "d") {
        // the oldest open decision's first option
        const d = document.querySelector("#team-decisions .decision");
        const b = d && (d.querySelector("button.option:not([disabled])") || d.querySelector("textarea"));
        if (b) { e.preventDefault(); b.focus(); }
      }
    };
    addEventListener("keydown", onKey);
    return () => removeEventListener("keydown", onKey);
  }, [store]);
  if (s.conn === State.unenrolled || s.conn === State.signedOut) return html`<${SignIn} s=${s} />`;
  if (s.conn === State.incompatible) return html`<${Incompatible} s=${s} />`;
  // An agent whose node could not be reached when it was attached shows a
  // note instead of its view; any other agent, of any node, its view.
  const away = s.selected ? s.elsewhere[s.selected] : null;
  return html`<div class="app" data-conn=${s.conn} data-cluster=${s.cluster ? (s.cluster.enabled ? "on" : "off") : ""}>
    <header class="top"><span class="logo">shard</span>
      <${ViewNav} s=${s} store=${store} />
      <span id="conn-state" class=${"conn " + s.conn}>${s.conn}</span>
      <${ClusterChip} st=${s.cluster} />
      <span class="notice" id="notice" aria-live="polite">${s.notice}</span>
      <span class="grow"></span><span class="keys">${s.view === "team" ? "n new goal · d decision · v view · t theme" : "j/k select · / prompt · n new · v view · t theme"}</span> <${Theme} /></header>
    <${Banner} s=${s} store=${store} />
    <${Moved} moved=${s.moved} dismiss=${() => store.set({ moved: null })} />
    ${s.view === "team" ? html`<${TeamView} s=${s} store=${store} />` : html`<div class="cols">
      <nav class="overview" aria-label="Agents"><${Overview} s=${s} store=${store} /><${CreateForm} s=${s} store=${store} /></nav>
      <main class="main">${s.selected ? (away ? html`<${RemoteAgent} a=${s.agents[s.selected] || { agent_id: s.selected }} node=${away.node} why=${away.why} retry=${() => store.attach(s.selected)} st=${s.cluster} />` : html`<${AgentView} s=${s} store=${store} />`) : html`<p class="empty">Select an agent, or create one.</p>`}</main>
      <aside class="side"><${Side} s=${s} store=${store} /></aside>
    </div>`}
    <${Dialogs} s=${s} store=${store} />
  </div>`;
}

const store = new Store();
const root = document.getElementById("root");
root.textContent = "";
render(html`<${StoreCtx.Provider} value=${store}><${App} store=${store} /><//>`, root);
store.start();
