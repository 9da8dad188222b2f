// The page's one WebSocket to the daemon: a ticket from POST /bootstrap (the
// session cookie rides along), the upgrade with the shard.v1 and ticket
// subprotocols from the page's own origin (docs/protocol.md §4.1), hello,
// then commands with correlation ids and events to a listener. On a drop it
// reconnects with the §2.2 backoff and a new ticket; the app re-attaches and
// resyncs on every "online" (§6.4).

import { backoffDelay } from "./backoff.js";

/** Connection states reported to onState. */
export const State = {
  connecting: "connecting", online: "online", reconnecting: "reconnecting",
  unenrolled: "unenrolled", signedOut: "signed_out", incompatible: "incompatible",
  moving: "moving", // the page's node is gone: off to another node's dashboard
};

/** The WebSocket close code the daemon closes a revoked or expired
 * credential's connections with. */
const POLICY_VIOLATION = 1008;

/** The protocol major version this page speaks (docs/protocol.md §7). */
export const PROTOCOL_MAJOR = 0;

/**
 * compatible says whether the page understands a hello's protocol_version:
 * its major version is the page's. A breaking change bumps the major and
 * additive ones the minor or patch (§7), so any 0.x.y is understood; a
 * version that is missing or not semver is not.
 */
export function compatible(version) {
  const m = /^(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(typeof version === "string" ? version : "");
  return !!m && Number(m[1]) === PROTOCOL_MAJOR;
}

export class Conn {
  /**
   * @param {object} h handlers: onState(state, info), onEvent(msg),
   *   onOnline(hello, generation), and onUnreachable() (optional): the
   *   page's daemon did not answer a reconnect; true when the page is
   *   leaving for another node's dashboard
   */
  constructor(h) {
    this.h = h;
    this.ws = null;
    this.attempt = 0;
    this.gen = 0;
    this.nextId = 1;
    this.calls = new Map();
    this.timer = 0;
    this.stopped = false;
  }

  start() { this.connect(); }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close();
  }

  state(s, info) { this.h.onState(s, info || {}); }

  async connect() {
    if (this.stopped) return;
    this.state(this.attempt === 0 ? State.connecting : State.reconnecting, { attempt: this.attempt });
    let boot;
    try {
      let r;
      try {
        r = await fetch("/bootstrap", { method: "POST", credentials: "same-origin", cache: "no-store" });
      } catch (e) {
        // No answer at all: the page's daemon is down (a proxy in front
        // says so with 502, 503 or 504, below).
        if (this.unreachable()) return;
        throw e;
      }
      if ((r.status === 502 || r.status === 503 || r.status === 504) && this.unreachable()) return;
      const body = await r.json().catch(() => ({}));
      if (r.status === 401) {
        // No cookie: never enrolled (or cleared). A cookie the daemon
        // refuses: revoked or expired. Both are final until enrolled.
        const revoked = /revoked|invalid|expired/.test(body.error || "");
        this.stopped = true;
        this.failCalls("signed out");
        this.state(revoked ? State.signedOut : State.unenrolled, { reason: body.error || "" });
        return;
      }
      if (!r.ok) throw new Error("bootstrap: HTTP " + r.status + " " + (body.error || ""));
      boot = body;
    } catch (e) {
      this.retry(String(e && e.message || e));
      return;
    }
    const gen = ++this.gen;
    let ws;
    try {
      ws = new WebSocket(boot.url, boot.protocols);
    } catch (e) {
      this.retry(String(e && e.message || e));
      return;
    }
    this.ws = ws;
    ws.onmessage = (m) => {
      if (gen !== this.gen) return;
      let msg;
      try { msg = JSON.parse(m.data); } catch { return; }
      if (msg.type === "hello") {
        if (!compatible(msg.protocol_version)) {
          // §7: a client that does not understand the major version
          // disconnects; there is no down-negotiation. Retrying would
          // meet the same daemon, so the page stops and says so.
          this.stopped = true;
          this.failCalls("incompatible protocol");
          ws.close();
          this.state(State.incompatible, { hello: msg });
          return;
        }
        this.attempt = 0;
        this.state(State.online, { hello: msg });
        this.h.onOnline(msg, gen);
        return;
      }
      if (msg.type === "response" && msg.id && this.calls.has(msg.id)) {
        const c = this.calls.get(msg.id);
        this.calls.delete(msg.id);
        if (msg.success) c.resolve(msg.data); else c.reject(Object.assign(new Error((msg.error && msg.error.message) || "failed"), { code: msg.error && msg.error.code, data: msg.error && msg.error.data }));
        return;
      }
      this.h.onEvent(msg);
    };
    ws.onclose = (e) => {
      if (gen !== this.gen) return;
      this.ws = null;
      this.failCalls("connection lost");
      // 1008 (policy violation) is the daemon closing a connection whose
      // credential it revoked or saw expire: ask /bootstrap at once, which
      // answers whether the session still holds (401: signed out), rather
      // than after a backoff. Once per drop; a second close backs off.
      if (e && e.code === POLICY_VIOLATION && this.attempt === 0) {
        this.attempt++;
        this.state(State.reconnecting, { reason: e.reason || "credential revoked" });
        this.connect();
        return;
      }
      this.retry("connection lost");
    };
    ws.onerror = () => {}; // onclose follows and retries
  }

  // unreachable asks onUnreachable whether the page leaves for another
  // node (a cluster's, docs/protocol.md §13 "A client's node dies"); if it
  // does, this connection stops here.
  unreachable() {
    if (this.stopped || !this.h.onUnreachable || !this.h.onUnreachable()) return false;
    this.stopped = true;
    this.failCalls("moving to another node");
    return true;
  }

  retry(reason) {
    if (this.stopped) return;
    const delay = backoffDelay(this.attempt);
    this.attempt++;
    this.state(State.reconnecting, { reason, delay, at: Date.now() + delay });
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  /** Reconnects now (the banner's "retry now"). */
  retryNow() {
    if (this.ws || this.stopped) return;
    clearTimeout(this.timer);
    this.connect();
  }

  failCalls(why) {
    for (const c of this.calls.values()) c.reject(new Error(why));
    this.calls.clear();
  }

  /** Sends a command and resolves with its response data. */
  call(msg) {
    return new Promise((resolve, reject) => {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
        reject(new Error("not connected"));
        return;
      }
      const id = "w" + (this.nextId++);
      this.calls.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ ...msg, id }));
    });
  }
}
