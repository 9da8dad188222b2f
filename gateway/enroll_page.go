package gateway

import (
	"crypto/sha256"
	"encoding/base64"
)

// The enrollment page served at GET /enroll. `shardctl web enroll` prints
// a link to it with the one-time code in the fragment (#code=…), which a
// browser never sends to a server nor puts in a Referer. The script reads
// the code, removes it from the address bar and history, and POSTs it to
// /enroll as JSON; the answer sets the session cookie. The page's CSP
// allows exactly this script and style (by hash) and fetches to its own
// origin, nothing else.

const enrollStyle = `body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em;color:#222}code{background:#eee;padding:0 .2em}`

const enrollScript = `(function () {
  "use strict";
  var status = document.getElementById("status");
  function show(text) { status.textContent = text; }
  var m = /^#code=([A-Za-z0-9_-]{43})$/.exec(window.location.hash);
  window.history.replaceState(null, "", window.location.pathname);
  if (!m) {
    show("This link carries no enrollment code. Run \"shardctl web enroll\" for a new link.");
    return;
  }
  fetch("/enroll", {
    method: "POST",
    credentials: "same-origin",
    cache: "no-store",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({code: m[1]})
  }).then(function (r) {
    return r.json().catch(function () { return {}; }).then(function (body) {
      if (r.ok) {
        show("This browser is enrolled (" + body.browser_id + "). ");
        var a = document.createElement("a");
        a.href = "/";
        a.id = "open-dashboard";
        a.textContent = "Open the dashboard";
        status.appendChild(a);
      } else {
        show("Enrollment failed (HTTP " + r.status + "): " + (body.error || "unknown error") +
          ". Run \"shardctl web enroll\" for a new link.");
      }
    });
  }, function () {
    show("Enrollment failed: the daemon could not be reached.");
  });
})();`

const enrollPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Shard: enroll this browser</title>
<style>` + enrollStyle + `</style>
</head>
<body>
<h1>Enroll this browser</h1>
<p id="status">Enrolling…</p>
<noscript><p>Enrollment needs JavaScript.</p></noscript>
<script>` + enrollScript + `</script>
</body>
</html>
`

// cspHash is the CSP source expression allowing an inline block.
func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// enrollPageCSP is the page's Content-Security-Policy.
func enrollPageCSP() string {
	return "default-src 'none'; script-src " + cspHash(enrollScript) + "; style-src " + cspHash(enrollStyle) +
		"; connect-src 'self'; img-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
}
