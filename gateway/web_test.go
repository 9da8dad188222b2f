package gateway

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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

func TestEnrollPageCSP(t *testing.T) {
	t.Parallel()
	csp := enrollPageCSP()
	if !strings.Contains(csp, cspHash(enrollScript)) || !strings.Contains(csp, cspHash(enrollStyle)) ||
		!strings.Contains(enrollPage, "<script>"+enrollScript+"</script>") || !strings.Contains(enrollPage, "<style>"+enrollStyle+"</style>") {
		t.Fatal("the page's inline blocks do not match the CSP hashes")
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*"} {
		if strings.Contains(csp, bad) {
			t.Errorf("CSP allows %s: %s", bad, csp)
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
