package gateway

import (
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/shard-dev/shard/web"
)

func testListener(t *testing.T) net.Addr {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", "127.0.0.1:7420")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestGuardLoopback(t *testing.T) {
	t.Parallel()
	g, err := newGuard(withDefaults(WebPolicy{}), testListener(t))
	if err != nil {
		t.Fatal(err)
	}
	if g.baseURL != "http://127.0.0.1:7420" || len(g.origins) != 1 || !g.origins["http://127.0.0.1:7420"] {
		t.Fatalf("loopback guard: base %q, origins %v", g.baseURL, g.origins)
	}
	r := httptest.NewRequest("GET", "http://127.0.0.1:7420/ws", nil)
	r.RemoteAddr = "127.0.0.1:5555"
	r.Header.Set("X-Forwarded-Proto", "https") // never honored in loopback mode
	info, ref := g.check(r, false)
	if ref != nil || info.scheme != "http" || info.forwarded {
		t.Fatalf("check = %+v, %+v; want plain http, no forwarding", info, ref)
	}
	r.Host = "localhost:7420"
	if _, ref := g.check(r, false); ref == nil || ref.status != 400 {
		t.Fatalf("alias Host accepted: %+v", ref)
	}
}

func TestGuardRemote(t *testing.T) {
	t.Parallel()
	p := withDefaults(WebPolicy{Remote: true, PublicHost: "shard.example.test", TrustProxy: "loopback",
		AllowedOrigins: []string{"https://other.example.test", "https://shard.example.test"}})
	g, err := newGuard(p, testListener(t))
	if err != nil {
		t.Fatal(err)
	}
	if g.baseURL != "https://shard.example.test" {
		t.Fatalf("base URL %q, want the public origin", g.baseURL)
	}
	req := func(peer string, hdr ...string) *http.Request {
		r := httptest.NewRequest("GET", "http://shard.example.test/ws", nil)
		r.RemoteAddr = peer + ":5555"
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Add(hdr[i], hdr[i+1])
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		r      *http.Request
		status int // 0: accepted
		scheme string
	}{
		{"proxy https", req("127.0.0.1", "X-Forwarded-Proto", "https"), 0, "https"},
		{"proxy ipv6", req("[::1]", "X-Forwarded-Proto", "https"), 0, "https"},
		{"proxy plaintext", req("127.0.0.1"), 400, ""},
		{"other loopback peer", req("127.0.0.3", "X-Forwarded-Proto", "https"), 400, ""},
		{"remote peer", req("10.0.0.1", "X-Forwarded-Proto", "https"), 400, ""},
		{"forwarded host matches", req("127.0.0.1", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "shard.example.test:443"), 0, "https"},
		{"forwarded host differs", req("127.0.0.1", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.example"), 400, ""},
	} {
		info, ref := g.check(tc.r, false)
		switch {
		case tc.status == 0 && ref != nil:
			t.Errorf("%s: refused %+v", tc.name, ref)
		case tc.status != 0 && (ref == nil || ref.status != tc.status):
			t.Errorf("%s: %+v, want %d", tc.name, ref, tc.status)
		case tc.status == 0 && info.scheme != tc.scheme:
			t.Errorf("%s: scheme %q, want %q", tc.name, info.scheme, tc.scheme)
		}
	}
}

func TestGuardRejectsBadPolicy(t *testing.T) {
	t.Parallel()
	for _, p := range []WebPolicy{
		{Remote: true},
		{Remote: true, PublicHost: "shard.example.test"},
		{Remote: true, PublicHost: "Shard.example.test.", AllowedOrigins: []string{"https://shard.example.test"}},
		{Remote: true, PublicHost: "shard.example.test", AllowedOrigins: []string{"https://shard.example.test/"}},
		{Remote: true, PublicHost: "shard.example.test", AllowedOrigins: []string{"https://shard.example.test"}, TrustProxy: "proxy.lan"},
	} {
		if _, err := newGuard(withDefaults(p), testListener(t)); err == nil {
			t.Errorf("newGuard(%+v) accepted", p)
		}
	}
}

// TestEnrollPageServed: GET /enroll answers package web's page with a CSP
// whose hashes are those of the page's inline script and style, and that
// allows nothing else inline; HEAD answers the headers alone.
func TestEnrollPageServed(t *testing.T) {
	t.Parallel()
	g := New(Config{}, nil, nil, nil, slog.New(slog.DiscardHandler))
	page, _ := web.EnrollPage()
	hash := func(tag string) string {
		t.Helper()
		s := string(page)
		i, j := strings.Index(s, "<"+tag+">"), strings.Index(s, "</"+tag+">")
		if i < 0 || j < i {
			t.Fatalf("the page has no inline %s", tag)
		}
		sum := sha256.Sum256([]byte(s[i+len(tag)+2 : j]))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		w := httptest.NewRecorder()
		g.serveEnroll(w, httptest.NewRequest(method, "http://127.0.0.1:7420/enroll", nil), reqInfo{})
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/html; charset=utf-8" ||
			w.Header().Get("Content-Length") != strconv.Itoa(len(page)) {
			t.Fatalf("%s /enroll: %d %v", method, w.Code, w.Header())
		}
		if want := map[string]string{http.MethodGet: string(page), http.MethodHead: ""}[method]; w.Body.String() != want {
			t.Errorf("%s /enroll: body of %d bytes, want %d", method, w.Body.Len(), len(want))
		}
		csp := w.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src "+hash("script")+";") || !strings.Contains(csp, "style-src "+hash("style")+";") {
			t.Errorf("CSP %q does not allow the page's inline blocks by hash", csp)
		}
		for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*"} {
			if strings.Contains(csp, bad) {
				t.Errorf("CSP allows %s: %s", bad, csp)
			}
		}
	}
}

func TestSecretShape(t *testing.T) {
	t.Parallel()
	v, h := newSecret("tok-01j0000000000000000000000")
	if secretID(v, prefixToken) != "tok-01j0000000000000000000000" || !hashMatches(v, h) {
		t.Fatalf("round trip failed for %q", v)
	}
	if hashMatches(v, "") || hashMatches(v+"x", h) || hashMatches(v, strings.ToUpper(h)) {
		t.Fatal("a wrong value or a revoked (empty) hash matched")
	}
	for _, bad := range []string{"", "tok-1", "tok-1.", ".abc", "wsn-01j.x" + v[len(v)-42:], "tok-.x", v + "x"} {
		if id := secretID(bad, prefixToken); id != "" {
			t.Errorf("secretID(%q) = %q", bad, id)
		}
	}
}
