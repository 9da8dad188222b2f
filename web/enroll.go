package web

import (
	"crypto/sha256"
	_ "embed" // the enrollment page
	"encoding/base64"
	"strings"
)

// enrollHTML is the enrollment page the gateway serves at GET /enroll.
// `shardctl web enroll` prints a link to it with the one-time code in the
// fragment (#code=…), which a browser never sends to a server nor puts in
// a Referer. Its inline script reads the code, removes it from the address
// bar and history, and POSTs it to /enroll as JSON; the answer sets the
// session cookie. The page is served before the browser has a session, so
// it is one self-contained file: no asset request, nothing else to allow.
//
//go:embed enroll.html
var enrollHTML string

// EnrollPage returns the enrollment page and its Content-Security-Policy,
// which allows exactly the page's one inline script and one inline style
// (by hash) and fetches to its own origin, nothing else. The hashes are
// computed from the embedded file, so editing the page cannot leave the
// policy behind.
func EnrollPage() (page []byte, csp string) {
	script, style := inlineBlock(enrollHTML, "script"), inlineBlock(enrollHTML, "style")
	csp = "default-src 'none'; script-src " + cspHash(script) + "; style-src " + cspHash(style) +
		"; connect-src 'self'; img-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
	return []byte(enrollHTML), csp
}

// inlineBlock returns the content of the page's one <tag>…</tag> element.
// The page is embedded at build time, so a missing or repeated block is a
// build defect, not a runtime state.
func inlineBlock(page, tag string) string {
	open, end := "<"+tag+">", "</"+tag+">"
	i, j := strings.Index(page, open), strings.Index(page, end)
	if i < 0 || j < i || strings.Count(page, open) != 1 || strings.Count(page, end) != 1 {
		panic("web: enroll.html must hold exactly one inline " + tag)
	}
	return page[i+len(open) : j]
}

// cspHash is the CSP source expression allowing an inline block.
func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}
