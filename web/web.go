package web

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// assets is the page, its modules, styles and the vendored libraries.
//
//go:embed assets
var assets embed.FS

// Options configure the handler.
type Options struct {
	// Tests serves the in-browser unit test page at /test/ (the pure
	// modules run in Chromium). Default false: the daemon never serves it.
	Tests bool
}

// Handler serves the dashboard: GET or HEAD of / is the page, /assets/…
// its files. Every other path or method is 404 or 405. The caller (the
// gateway) has already checked Host and set the listener-wide security
// headers; Handler replaces the Content-Security-Policy with the page's own,
// which allows scripts, styles and images from the page's origin only (and
// images from the page's own blob URLs), and
// connections to that origin and its WebSocket (no inline script, no eval).
func Handler(o Options) http.Handler {
	root, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("web: embedded assets missing: " + err.Error()) // a build defect, not a runtime state
	}
	return &handler{root: root, tests: o.Tests}
}

type handler struct {
	root  fs.FS
	tests bool
}

// Paths the handler serves.
const (
	indexPath  = "/"
	assetsPath = "/assets/"
	testPath   = "/test/"
)

// CSP returns the page's Content-Security-Policy for a request to host (the
// Host the gateway has pinned). connect-src names the WebSocket URLs
// explicitly: 'self' covers ws: of the same host only in newer browsers.
// img-src allows blob: besides 'self': the images of prompts and of the
// transcript (docs/protocol.md §11 Image) are drawn from blob URLs the page
// makes of their bytes; data: URLs stay refused.
func CSP(host string) string {
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; font-src 'none'; " +
		"connect-src 'self' ws://" + host + " wss://" + host + "; " +
		"frame-ancestors 'none'; base-uri 'none'; form-action 'none'; object-src 'none'"
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	name := ""
	switch p := r.URL.Path; {
	case p == indexPath:
		name = "index.html"
	case strings.HasPrefix(p, assetsPath):
		name = strings.TrimPrefix(path.Clean(p), assetsPath)
	case h.tests && p == testPath:
		name = "test/index.html"
	}
	if name == "" || (strings.HasPrefix(name, "test/") && !h.tests) {
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	b, err := fs.ReadFile(h.root, name)
	if err != nil || !fs.ValidPath(name) {
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) {
	case ".mjs", ".js":
		ct = "text/javascript; charset=utf-8"
	case ".html":
		ct = "text/html; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP(r.Host))
	hd.Set("Content-Type", ct)
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(b)
	}
}

// writeError answers as the gateway's refusals do: {"error": reason}.
func writeError(w http.ResponseWriter, status int, reason string) {
	b := []byte(`{"error":` + strconv.Quote(reason) + "}\n")
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
