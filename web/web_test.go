package web

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestHandlerRoutes(t *testing.T) {
	t.Parallel()
	h := Handler(Options{})
	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/", 200, "text/html; charset=utf-8"},
		{"GET", "/assets/js/app.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/assets/vendor/preact.mjs", 200, "text/javascript; charset=utf-8"},
		{"GET", "/assets/app.css", 200, "text/css; charset=utf-8"},
		{"GET", "/assets/icon.svg", 200, "image/svg+xml"},
		{"GET", "/assets/nope.js", 404, ""},
		{"GET", "/assets/../web.go", 404, ""},
		{"GET", "/assets/", 404, ""},
		{"GET", "/index.html", 404, ""},
		{"GET", "/test/", 404, ""},
		{"GET", "/assets/test/unit.js", 404, ""},
		{"POST", "/", 405, ""},
	} {
		r := httptest.NewRequest(tc.method, "http://127.0.0.1:7420"+tc.path, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, w.Code, tc.status)
			continue
		}
		if tc.status != 200 {
			continue
		}
		if got := w.Header().Get("Content-Type"); got != tc.ctype {
			t.Errorf("%s %s: Content-Type %q, want %q", tc.method, tc.path, got, tc.ctype)
		}
		if got := w.Header().Get("Content-Security-Policy"); got != CSP("127.0.0.1:7420") {
			t.Errorf("%s %s: CSP %q", tc.method, tc.path, got)
		}
		if tc.method == "HEAD" && w.Body.Len() != 0 {
			t.Errorf("HEAD %s has a body", tc.path)
		}
	}
	ht := Handler(Options{Tests: true})
	for _, p := range []string{"/test/", "/assets/test/unit.js"} {
		w := httptest.NewRecorder()
		ht.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:7420"+p, nil))
		if w.Code != http.StatusOK {
			t.Errorf("with Tests, GET %s: %d", p, w.Code)
		}
	}
}

// TestCSPStrict holds the page to its policy: no inline script or style,
// no eval, nothing from another origin, in the policy and in the files.
func TestCSPStrict(t *testing.T) {
	t.Parallel()
	csp := CSP("127.0.0.1:7420")
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*", "data:", "http:", "https:"} {
		if strings.Contains(csp, bad) {
			t.Errorf("CSP allows %s: %s", bad, csp)
		}
	}
	inline := regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]|<style|\son[a-z]+=|style=`)
	remote := regexp.MustCompile(`(?:src|href)="(?:https?:)?//`)
	evals := regexp.MustCompile(`\beval\(|new Function\(`)
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		s := string(b)
		if strings.HasSuffix(p, ".html") && (inline.MatchString(s) || remote.MatchString(s)) {
			t.Errorf("%s has inline code or a remote reference", p)
		}
		if (strings.HasSuffix(p, ".js") || strings.HasSuffix(p, ".mjs")) && evals.MatchString(s) {
			t.Errorf("%s evaluates strings", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEnrollPage: the page holds one inline script and one inline style,
// the policy allows exactly those by hash, and a page with a block missing
// or repeated is refused rather than served under a stale policy.
func TestEnrollPage(t *testing.T) {
	t.Parallel()
	page, csp := EnrollPage()
	for _, tag := range []string{"script", "style"} {
		if !strings.Contains(csp, tag+"-src "+cspHash(inlineBlock(string(page), tag))+";") {
			t.Errorf("CSP %q does not allow the page's %s by hash", csp, tag)
		}
	}
	if !strings.Contains(string(page), `id="status"`) || !strings.Contains(string(page), `fetch("/enroll"`) {
		t.Error("the page lost its status line or its POST /enroll")
	}
	for _, bad := range []string{"<p>no script</p>", "<script>a</script><script>b</script>"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("inlineBlock(%q) did not refuse", bad)
				}
			}()
			inlineBlock(bad, "script")
		}()
	}
}
