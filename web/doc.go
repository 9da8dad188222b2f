// Package web is the browser dashboard shardd serves at / on its web
// listener: one page and its ES modules, embedded with go:embed so the
// binary needs no Node toolchain at build or run time.
//
// The gateway mounts Handler behind its own checks (Host pinning, the
// listener-wide security headers); this package holds no credentials and no
// routes but the page's. The page signs in with the session cookie set by
// /enroll, takes a single-use ticket from POST /bootstrap for every WebSocket
// it opens (docs/protocol.md §4.1), and speaks the wire protocol like any
// other client: agent.list (the live and the recent agents, paged) and
// agent_activity for the overview, one interactive agent.attach for the
// selected agent and observer attachments for the rest, sync then live
// events for the transcript (§6.4). The team view reads the team.* lists
// and follows the daemon-wide team_* events (§10.4), which need no
// attachment.
//
// The page's logic that needs no DOM (the transcript reducer, the resync
// merge, the reconnect backoff) lives in pure modules under assets/js/
// and is tested in headless Chromium by the test page at /test/, served
// only when Options.Tests is set.
//
// Preact and htm are vendored under assets/vendor/ (see the README there).
//
// The enrollment page (enroll.html, EnrollPage) lives here too, though the
// gateway serves it at GET /enroll: a browser opens it before it has a
// session, so it is one self-contained file whose inline script and style
// its policy allows by hash.
package web
