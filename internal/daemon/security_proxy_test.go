package daemon_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
)

// Remote mode behind a trusted reverse proxy (docs/protocol.md §4.1.2). The
// proxy is
// 127.0.0.2; requests from any other peer are direct, whatever forwarded
// headers they carry.
const (
	proxyIP    = "127.0.0.2"
	publicHost = "shard.example.test"
	pubOrigin  = "https://shard.example.test"
	altOrigin  = "https://other.example.test"
)

func newProxyFixture(t *testing.T, insecure bool) *secFixture {
	f := newSecFixture(t, func(c *config.Config) {
		c.Web.TrustProxy = proxyIP
		c.Web.PublicHost = publicHost
		c.Web.AllowedOrigins = []string{pubOrigin, altOrigin}
		if insecure {
			c.Web.AllowInsecureRemote = true
			c.Web.AllowedOrigins = []string{"http://shard.example.test"}
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("fixture config: %v", err)
		}
	})
	f.host, f.origin = publicHost, pubOrigin
	f.via = func(r rawReq) rawReq { return r.with("X-Forwarded-Proto", "https").fromAddr(proxyIP) }
	if insecure {
		f.origin = "http://shard.example.test"
		f.via = func(r rawReq) rawReq { return r.fromAddr(proxyIP) }
	}
	return f
}

func TestWebAuthTrustedProxy(t *testing.T) {
	f := newProxyFixture(t, false)
	port := f.addr[strings.LastIndexByte(f.addr, ':')+1:]
	// direct strips the proxy: the same request from a peer that is not
	// the upstream.
	direct := func(r rawReq) rawReq { r.from = "127.0.0.1"; return r }

	cases := []secCase{
		{name: "enroll through the proxy", want: http.StatusOK, req: func(t *testing.T, f *secFixture) rawReq {
			r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
			r.body = enrollBody(f.enrollCode(t).Code)
			return r
		}, check: func(t *testing.T, _ *secFixture, resp rawResp) {
			c := resp.header.Get("Set-Cookie")
			if !strings.HasPrefix(c, "__Host-shard_session=wsn-") || !strings.Contains(c, "Secure") || !strings.Contains(c, "HttpOnly") ||
				!strings.Contains(c, "SameSite=Strict") || !strings.Contains(c, "Path=/") || strings.Contains(c, "Domain") {
				t.Errorf("https cookie = %q, want __Host-shard_session; Path=/; HttpOnly; Secure; SameSite=Strict", c)
			}
		}},
		{name: "browser ticket through the proxy", want: http.StatusSwitchingProtocols, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.upgrade(pubOrigin, f.bootstrap(t, cookie, pubOrigin))
		}},
		{name: "browser ticket from the second allowed origin", want: http.StatusSwitchingProtocols, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.upgrade(altOrigin, f.bootstrap(t, cookie, altOrigin))
		}},
		{name: "cross-origin ticket use", want: http.StatusUnauthorized, reason: "another origin", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.upgrade(altOrigin, f.bootstrap(t, cookie, pubOrigin))
		}},
		{name: "explicit default port in Host", want: http.StatusOK, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			r := f.browser(http.MethodPost, "/bootstrap").with("Cookie", cookie)
			r.host = publicHost + ":443"
			return r
		}},
		{name: "Host on another port", want: http.StatusBadRequest, reason: "unexpected Host", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			r := f.browser(http.MethodPost, "/bootstrap").with("Cookie", cookie)
			r.host = publicHost + ":8443"
			return r
		}},
		{name: "listener address as Host", want: http.StatusBadRequest, reason: "unexpected Host", req: func(t *testing.T, f *secFixture) rawReq {
			r := f.upgrade("", f.localTicket(t))
			r.host = "127.0.0.1:" + port
			return r
		}},
		{name: "matching forwarded host", want: http.StatusOK, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.browser(http.MethodPost, "/bootstrap").with("Cookie", cookie).with("X-Forwarded-Host", publicHost)
		}},
		{name: "mismatched forwarded host", want: http.StatusBadRequest, reason: "X-Forwarded-Host does not match", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.browser(http.MethodPost, "/bootstrap").with("Cookie", cookie).with("X-Forwarded-Host", "evil.example")
		}},
		{name: "forwarded host with another port", want: http.StatusBadRequest, reason: "X-Forwarded-Host does not match", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.browser(http.MethodPost, "/bootstrap").with("Cookie", cookie).with("X-Forwarded-Host", publicHost+":8443")
		}},
		{name: "forwarded headers spoofed by a direct peer", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return direct(f.browser(http.MethodPost, "/bootstrap").with("Cookie", cookie).
				with("X-Forwarded-Host", publicHost).with("X-Forwarded-For", proxyIP))
		}, check: func(t *testing.T, _ *secFixture, resp rawResp) {
			if !strings.Contains(resp.body, "plaintext") {
				t.Errorf("body %s: want the plaintext refusal (forwarded proto ignored)", resp.body)
			}
		}},
		{name: "spoofed ws upgrade from a direct peer", want: http.StatusBadRequest, reason: "plaintext", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return direct(f.upgrade(pubOrigin, f.bootstrap(t, cookie, pubOrigin)))
		}},
		{name: "X-Forwarded-For is not trusted", want: http.StatusBadRequest, reason: "plaintext", req: func(t *testing.T, f *secFixture) rawReq {
			r := f.upgrade("", f.localTicket(t)).with("X-Forwarded-For", proxyIP)
			r.from = "127.0.0.1"
			return r
		}},
		{name: "plaintext from the proxy", want: http.StatusBadRequest, reason: "plaintext", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			r := rawReq{method: http.MethodPost, path: "/bootstrap", host: publicHost}.with("Origin", pubOrigin).
				with("Cookie", cookie).with("X-Forwarded-Proto", "http")
			return r.fromAddr(proxyIP)
		}},
		{name: "forwarded proto chain", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			r := rawReq{path: "/enroll", host: publicHost}.with("X-Forwarded-Proto", "https, http")
			return r.fromAddr(proxyIP)
		}},
		{name: "two forwarded proto headers", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			r := rawReq{path: "/enroll", host: publicHost}.with("X-Forwarded-Proto", "https").with("X-Forwarded-Proto", "https")
			return r.fromAddr(proxyIP)
		}},
		{name: "plain cookie over https", want: http.StatusUnauthorized, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			_, value, _ := strings.Cut(cookie, "=")
			return f.browser(http.MethodPost, "/bootstrap").with("Cookie", "shard_session="+value)
		}},
		{name: "metrics through the proxy", want: http.StatusForbidden, req: func(t *testing.T, f *secFixture) rawReq {
			return f.via(rawReq{path: "/metrics", host: publicHost})
		}},
		{name: "metrics for a local scraper", want: http.StatusOK, req: func(t *testing.T, f *secFixture) rawReq {
			return rawReq{path: "/metrics", host: "127.0.0.1:" + port, from: "127.0.0.1"}
		}},
	}
	runSecCases(t, f, cases)

	var enroll protocol.WebEnrollData
	if err := f.unix.Call(ctx(t), &protocol.WebEnroll{Header: protocol.Header{Type: protocol.TypeWebEnroll}}, &enroll); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(enroll.URL, pubOrigin+"/enroll#code=") {
		t.Errorf("enrollment link %q is not on the public origin", enroll.URL)
	}
	if strings.Contains(f.h.log.String(), "insecure remote mode") {
		t.Error("the insecure-remote warning was logged in a TLS deployment")
	}
}

func TestWebAuthInsecureProxy(t *testing.T) {
	f := newProxyFixture(t, true)
	cases := []secCase{
		{name: "enroll over plaintext", want: http.StatusOK, req: func(t *testing.T, f *secFixture) rawReq {
			r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
			r.body = enrollBody(f.enrollCode(t).Code)
			return r
		}, check: func(t *testing.T, _ *secFixture, resp rawResp) {
			if c := resp.header.Get("Set-Cookie"); !strings.HasPrefix(c, "shard_session=") || strings.Contains(c, "Secure") {
				t.Errorf("plaintext cookie = %q, want a non-Secure shard_session", c)
			}
		}},
		{name: "browser ticket over plaintext", want: http.StatusSwitchingProtocols, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.upgrade(f.origin, f.bootstrap(t, cookie, f.origin))
		}},
		{name: "Secure cookie over plaintext", want: http.StatusBadRequest, reason: "Secure session cookie over plain http", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			_, value, _ := strings.Cut(cookie, "=")
			return f.browser(http.MethodPost, "/bootstrap").with("Cookie", "__Host-shard_session="+value)
		}},
		{name: "https origin not allowed", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
			r.headers[0][1] = pubOrigin
			r.body = enrollBody(f.enrollCode(t).Code)
			return r
		}},
	}
	runSecCases(t, f, cases)
	if n := strings.Count(f.h.log.String(), "insecure remote mode"); n != 1 {
		t.Errorf("the insecure-remote warning was logged %d times, want once:\n%s", n, f.h.log.String())
	}
}

// TestWebRateLimit: enrollment attempts are limited per peer (a burst of
// 5); another peer is unaffected.
func TestWebRateLimit(t *testing.T) {
	f := newSecFixtureOpts(t, nil, nil)
	attempt := func(from string) rawResp {
		r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
		r.body = enrollBody(strings.Repeat("A", 43))
		return r.fromAddr(from).do(t, f.addr)
	}
	for i := range 5 {
		if got := attempt("127.0.0.9").status; got != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i+1, got)
		}
	}
	resp := attempt("127.0.0.9")
	if resp.status != http.StatusTooManyRequests || resp.header.Get("Retry-After") == "" {
		t.Fatalf("sixth attempt: %d (Retry-After %q), want 429 with Retry-After", resp.status, resp.header.Get("Retry-After"))
	}
	checkHeaders(t, resp)
	if got := attempt("127.0.0.8").status; got != http.StatusUnauthorized {
		t.Fatalf("another peer: %d, want 401 (its own bucket)", got)
	}
}

// TestForeignOriginSpendsNoRateLimit: a web page on another origin that
// hammers /enroll and /bootstrap from the loopback peer is refused for its
// Origin every time and never spends the bucket of the real page (issue
// 14: the limiter was charged before the Origin check).
func TestForeignOriginSpendsNoRateLimit(t *testing.T) {
	f := newSecFixtureOpts(t, nil, nil)
	const peer, evil = "127.0.0.9", "http://evil.example"
	post := func(path, origin string) rawResp {
		r := f.browser(http.MethodPost, path).with("Content-Type", "application/json")
		r.headers[0][1] = origin
		if path == "/enroll" {
			r.body = enrollBody(strings.Repeat("A", 43))
		}
		return r.fromAddr(peer).do(t, f.addr)
	}
	for i := range 50 { // ten times the enroll burst, more than the bootstrap one
		for _, path := range []string{"/enroll", "/bootstrap"} {
			if got := post(path, evil); got.status != http.StatusBadRequest || !strings.Contains(got.body, "Origin not allowed") {
				t.Fatalf("foreign %s %d: %d %s, want 400 Origin not allowed", path, i+1, got.status, got.body)
			}
		}
	}
	if got := post("/enroll", f.origin); got.status != http.StatusUnauthorized {
		t.Fatalf("enroll from the right origin after the foreign burst: %d %s, want 401 (a bad code, not 429)", got.status, got.body)
	}
	if got := post("/bootstrap", f.origin); got.status != http.StatusUnauthorized {
		t.Fatalf("bootstrap from the right origin after the foreign burst: %d %s, want 401 (no cookie, not 429)", got.status, got.body)
	}
}
