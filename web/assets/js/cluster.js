// The cluster as the page's daemon sees it: the header's chip and panel
// from cluster.status (docs/protocol.md §10.1, additive), an agent's node
// (AgentInfo.node) and the note shown for an agent whose node the page's
// daemon cannot reach now. Another node's agent is attached like any
// other: the page's daemon forwards its commands to that node
// (docs/protocol.md §13 "Agents of other nodes"); only a node that is
// down answers NODE_UNAVAILABLE, and the page shows that note instead.

import { html } from "./html.js";

/**
 * clustered says whether a cluster.status answer is a cluster: a single
 * shardd answers {enabled: false}, and a daemon that predates the command
 * gives no answer (null here). Either way the page shows nothing of it.
 */
export function clustered(st) {
  return !!(st && st.enabled && Array.isArray(st.nodes));
}

/**
 * remoteNode is the node hosting agent a when that is not the page's own
 * daemon, else "" (the agent list marks it). The page's node is
 * cluster.status's node; until that is known, an agent is taken as local.
 * A node learnt from a refused attach (seen: agent_id -> {node}) counts
 * too.
 */
export function remoteNode(a, st, seen) {
  if (!a) return "";
  if (seen && seen[a.agent_id]) return seen[a.agent_id].node;
  if (!a.node || !st || !st.node) return "";
  return a.node !== st.node ? a.node : "";
}

const livesOn = /lives on node (\S+?);/;

/**
 * unreachableNode reads the node a refused agent-scoped command could not
 * reach: NODE_UNAVAILABLE names it in its data ({node}), and an older
 * daemon's UNSUPPORTED in its message ("agent <id> lives on node <node>;
 * …", docs/protocol.md §13). "" for any other error. fallback is the node
 * the page already knew (AgentInfo.node) should the answer not name one.
 */
export function unreachableNode(e, fallback) {
  if (!e) return "";
  if (e.code === "NODE_UNAVAILABLE") return (e.data && e.data.node) || fallback || "";
  if (e.code !== "UNSUPPORTED") return "";
  const m = livesOn.exec(e.message || "");
  return m ? m[1] : (fallback || "");
}

/**
 * dashboardURL is the dashboard of node name as st lists it: its web_url
 * (cluster.status, docs/protocol.md §10.1) when that node is alive and the
 * URL is http(s), else "" (not known, not up, or not a link to follow).
 */
export function dashboardURL(st, name) {
  const n = ((st && st.nodes) || []).find((x) => x.node === name);
  if (!n || n.health !== "alive") return "";
  return webBase(n.web_url);
}

/** webBase is a web_url as a dashboard's address ("…/"), "" when it is
 * not an http(s) URL. */
function webBase(webURL) {
  if (!webURL) return "";
  try {
    const u = new URL(webURL);
    if (u.protocol !== "http:" && u.protocol !== "https:") return "";
    return u.origin + u.pathname.replace(/\/*$/, "/");
  } catch (e) {
    return "";
  }
}

/**
 * failoverTarget is where the page goes when its own node is gone (its
 * daemon does not answer at all): the dashboard of the next node of st
 * (the last cluster.status it read) in name order after the page's node,
 * wrapping around, skipping the nodes known dead, those that published no
 * http(s) web_url, and any served from the page's own origin here — the
 * order a client of the package and shardctl attach fail over in
 * (client.Failover, docs/protocol.md §13 "A client's node dies"), the
 * lost node itself being where the page already is. null when there is
 * none (or no cluster).
 */
export function failoverTarget(st, here) {
  if (!clustered(st) || !st.node) return null;
  const others = st.nodes.filter((n) => n.node !== st.node && n.health !== "dead")
    .sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
  const order = [...others.filter((n) => n.node > st.node), ...others.filter((n) => n.node < st.node)];
  for (const n of order) {
    const url = webBase(n.web_url);
    if (url && new URL(url).origin !== here) return { node: n.node, url };
  }
  return null;
}

/** The node-name shape (cluster.node), for a name read from the address. */
const nodeName = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/**
 * failoverHash is the address fragment the page hands the next node's
 * dashboard: what it showed (#agent=<id>, #team[=<goal>]) and the node
 * it lost ("from=<node>"), which that page says it came from.
 */
export function failoverHash(s, from) {
  let h = "";
  if (s.view === "team") h = "team" + (s.teamGoal ? "=" + s.teamGoal : "");
  else if (s.selected) h = "agent=" + s.selected;
  return "#" + (h ? h + "&" : "") + "from=" + encodeURIComponent(from);
}

/**
 * splitFailover reads failoverHash's fragment back: the lost node ("" when
 * the fragment names none, or not a node name) and the fragment without
 * it (the page's own #agent=… or #team…).
 */
export function splitFailover(hash) {
  const m = /^#(?:(.*)&)?from=([^&]*)$/.exec(hash || "");
  if (!m) return { from: "", hash: hash || "" };
  let from = "";
  try { from = decodeURIComponent(m[2]); } catch (e) { from = ""; }
  return { from: nodeName.test(from) ? from : "", hash: m[1] ? "#" + m[1] : "" };
}

/** failoverNote is what the page says after it moved: the words of
 * shardctl attach (client.FailoverNote). */
export function failoverNote(from, to) {
  return !from || from === to ? "reconnected through node " + to : "reconnected through node " + to + "; node " + from + " is gone";
}

/**
 * Moved is the note a page shows once it took over from a lost node's
 * page: "reconnected through node n3; node n2 is gone", until dismissed.
 */
export function Moved({ moved, dismiss }) {
  if (!moved) return null;
  return html`<div id="moved" class="banner moved" role="status" data-from=${moved.from} data-to=${moved.to}>${failoverNote(moved.from, moved.to)}
    ${" "}<button class="dismiss" onClick=${dismiss} title="dismiss">✕</button></div>`;
}

/** The nodes of st counted by health, in a fixed order. */
export function healthCounts(st) {
  const c = { alive: 0, suspect: 0, dead: 0 };
  for (const n of (st && st.nodes) || []) c[n.health] = (c[n.health] || 0) + 1;
  return c;
}

/** One node's load against its capacity: "2 agents · 1 runtime · 0 runs / 8". */
export function loadText(n) {
  const l = n.load || {};
  const plural = (k, w) => (k || 0) + " " + w + ((k || 0) === 1 ? "" : "s");
  return plural(l.agents, "agent") + " · " + plural(l.runtimes, "runtime") + " · " + plural(l.runs, "run") +
    (n.capacity ? " / " + n.capacity : "");
}

/**
 * ClusterChip is the header's chip and its panel: the page's node, how
 * many nodes are alive, and on opening every node with its health,
 * incarnation, load and capacity, the page's own node marked, and a link
 * to each other alive node's dashboard when it published its web address.
 * Nothing on a single shardd.
 */
export function ClusterChip({ st }) {
  if (!clustered(st)) return null;
  const c = healthCounts(st);
  const bad = c.suspect + c.dead > 0;
  return html`<details id="cluster" class=${"cluster" + (bad ? " degraded" : "")} data-node=${st.node || ""}>
    <summary class="conn" title="cluster.status">node ${st.node} · ${c.alive}/${st.nodes.length} alive</summary>
    <table class="cluster-nodes"><thead><tr><th>node</th><th>health</th><th>incarnation</th><th>load / capacity</th><th></th></tr></thead>
      <tbody>${st.nodes.map((n) => html`<tr key=${n.node} class=${"cn h-" + n.health + (n.self ? " self" : "")} data-node=${n.node}
          data-health=${n.health} data-incarnation=${n.incarnation} data-self=${n.self ? "1" : ""}>
        <td>${n.node}${n.self ? html` <span class="badge self">this node</span>` : null}</td>
        <td class="health">${n.health}</td><td class="inc">${n.incarnation}</td><td class="load">${loadText(n)}</td>
        <td class="dash">${!n.self && dashboardURL(st, n.node) ? html`<a href=${dashboardURL(st, n.node)} target="_blank" rel="noopener noreferrer"
          title=${"open node " + n.node + "'s dashboard"}>dashboard</a>` : null}</td></tr>`)}</tbody></table>
  </details>`;
}

/**
 * NodeBadge marks an agent's node in the agent list: only when the agent
 * has one (a cluster), as "elsewhere" when it is not the page's node, and
 * with that node's health when cluster.status (st) says it is not alive:
 * the agent's status is then only what its node last published.
 */
export function NodeBadge({ a, remote, st }) {
  if (!a.node) return null;
  const n = ((st && st.nodes) || []).find((x) => x.node === a.node);
  const down = n && n.health !== "alive" ? n.health : "";
  const title = (remote ? "lives on node " + a.node + ", reached through this page's node" : "on this node") +
    (down ? "; the node is " + down + ": its status is as it last published it" : "");
  return html`<span class=${"badge node" + (remote ? " remote" : "") + (down ? " down" : "")} data-node=${a.node} data-health=${down}
    title=${title}>${(remote ? "on " + a.node : a.node) + (down ? " · " + down : "")}</span>`;
}

/**
 * RemoteAgent stands in for the agent view of an agent whose node the
 * page's daemon could not reach when it attached: what the directory last
 * said of it, why, and a retry (selecting it again retries too).
 */
export function RemoteAgent({ a, node, why, retry, st }) {
  const dash = dashboardURL(st, node);
  return html`<section class="agentview remote" id="remote-agent" data-selected=${a.agent_id} data-node=${node}>
    <header class="ahead"><b>${a.title || a.display_name || a.name || a.agent_id}</b>
      <span class="meta">${a.status || ""}${a.runtime_state ? " · " + a.runtime_state : ""}</span><span class="meta">${a.cwd || ""}</span></header>
    <p class="remote-note" role="note">This agent lives on node <b>${node}</b>, which this page's daemon cannot reach now${why ? ": " + why : ""}.
      ${retry ? html`<button class="retry" onClick=${retry}>Try again</button>` : null}
      ${dash ? html` Or open <a href=${dash} target="_blank" rel="noopener noreferrer">${node}'s dashboard</a>.` : null}</p>
  </section>`;
}
