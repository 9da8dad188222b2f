package daemon_test

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/gateway"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/protocol"
)

// rawReq is one HTTP/1.1 request written byte for byte, so that a test can
// send any Host, repeat headers and pick the source address.
type rawReq struct {
	method, path string
	host         string
	headers      [][2]string
	body         string
	ws           bool   // add the WebSocket upgrade headers
	from         string // source IP (a 127.0.0.0/8 address); "" any
}

type rawResp struct {
	status int
	header http.Header
	body   string
}

func (r rawReq) with(k, v string) rawReq {
	r.headers = append(append([][2]string(nil), r.headers...), [2]string{k, v})
	return r
}

func (r rawReq) fromAddr(ip string) rawReq { r.from = ip; return r }

// do sends r to the listener at addr and reads the answer.
func (r rawReq) do(t *testing.T, addr string) rawResp {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if r.from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(r.from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %q: %v", addr, r.from, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	method := r.method
	if method == "" {
		method = http.MethodGet
	}
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, r.path, r.host)
	for _, h := range r.headers {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	if r.ws {
		key := make([]byte, 16)
		_, _ = rand.Read(key)
		fmt.Fprintf(&b, "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n",
			base64.StdEncoding.EncodeToString(key))
	} else {
		b.WriteString("Connection: close\r\n")
	}
	if r.body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(r.body))
	}
	b.WriteString("\r\n")
	b.WriteString(r.body)
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	out := rawResp{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		out.body = string(body)
	}
	return out
}

// secFixture is a daemon under test with what the cases need to mint
// credentials of every kind.
type secFixture struct {
	h      *harness
	addr   string // the listener, host:port
	unix   *client.Conn
	next   atomic.Int32 // source address rotation, so rate limits stay out of the way
	host   string       // the Host browsers use
	origin string       // an allowed origin
	// via decorates a browser request (remote mode: from the proxy, with
	// its forwarded headers).
	via func(rawReq) rawReq
}

// generous keeps the rate limits out of the way of tests that enroll and
// bootstrap a lot through one proxy address; TestWebRateLimit checks the
// defaults.
func generous(o *daemon.Options) {
	o.EnrollLimit = gateway.RateLimit{Burst: 1000, Every: time.Millisecond}
	o.BootstrapLimit = o.EnrollLimit
}

func newSecFixture(t *testing.T, mutate func(*config.Config)) *secFixture {
	t.Helper()
	return newSecFixtureOpts(t, mutate, generous)
}

func newSecFixtureOpts(t *testing.T, mutate func(*config.Config), opts func(*daemon.Options)) *secFixture {
	t.Helper()
	cfg := newConfig(t)
	if mutate != nil {
		mutate(cfg)
	}
	h := startOpts(t, cfg, opts)
	u := strings.TrimPrefix(h.d.WebURL(), "http://")
	f := &secFixture{h: h, addr: u, unix: h.dial(), host: u, origin: "http://" + u, via: func(r rawReq) rawReq { return r }}
	f.next.Store(10)
	return f
}

// src returns a fresh loopback source address.
func (f *secFixture) src() string { return "127.0.0." + strconv.Itoa(int(f.next.Add(1))%250+3) }

// rotate gives r a fresh source address unless it has one (the proxy's).
func (f *secFixture) rotate(r rawReq) rawReq {
	if r.from == "" {
		r.from = f.src()
	}
	return r
}

func (f *secFixture) browser(method, path string) rawReq {
	return f.via(rawReq{method: method, path: path, host: f.host}.with("Origin", f.origin).with("User-Agent", testUserAgent))
}

// testUserAgent is the User-Agent of the fixture's browser requests; the
// daemon keeps it with an enrolled browser (web.sessions.list user_agent).
const testUserAgent = "shard-test-browser/1.0"

// enrollCode mints a one-time code over the unix socket.
func (f *secFixture) enrollCode(t *testing.T) protocol.WebEnrollData {
	t.Helper()
	var d protocol.WebEnrollData
	if err := f.unix.Call(ctx(t), &protocol.WebEnroll{Header: protocol.Header{Type: protocol.TypeWebEnroll}, Note: "test"}, &d); err != nil {
		t.Fatalf("web.enroll: %v", err)
	}
	return d
}

func enrollBody(code string) string { return `{"code":"` + code + `"}` }

// enroll runs the browser side of an enrollment and returns the
// Set-Cookie header and the cookie's name=value.
func (f *secFixture) enroll(t *testing.T) (setCookie, cookie string) {
	t.Helper()
	code := f.enrollCode(t).Code
	r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
	r.body = enrollBody(code)
	resp := f.rotate(r).do(t, f.addr)
	if resp.status != http.StatusOK {
		t.Fatalf("enroll: %d %s", resp.status, resp.body)
	}
	setCookie = resp.header.Get("Set-Cookie")
	cookie, _, _ = strings.Cut(setCookie, ";")
	return setCookie, cookie
}

// bootstrap asks for a browser ticket with cookie from origin.
func (f *secFixture) bootstrap(t *testing.T, cookie, origin string) string {
	t.Helper()
	r := f.via(rawReq{method: http.MethodPost, path: "/bootstrap", host: f.host}.with("Origin", origin).with("Cookie", cookie))
	resp := f.rotate(r).do(t, f.addr)
	if resp.status != http.StatusOK {
		t.Fatalf("bootstrap: %d %s", resp.status, resp.body)
	}
	var data struct {
		Ticket    string   `json:"ticket"`
		URL       string   `json:"url"`
		Protocols []string `json:"protocols"`
	}
	if err := json.Unmarshal([]byte(resp.body), &data); err != nil || data.Ticket == "" {
		t.Fatalf("bootstrap body %q: %v", resp.body, err)
	}
	if want := []string{"shard.v1", "ticket." + data.Ticket}; strings.Join(data.Protocols, ",") != strings.Join(want, ",") {
		t.Fatalf("bootstrap protocols = %q", data.Protocols)
	}
	return data.Ticket
}

func (f *secFixture) localTicket(t *testing.T) string { return mintTicket(t, f.unix).Ticket }

func (f *secFixture) token(t *testing.T) protocol.TokenCreateData {
	t.Helper()
	var d protocol.TokenCreateData
	if err := f.unix.Call(ctx(t), &protocol.TokenCreate{Header: protocol.Header{Type: protocol.TypeTokenCreate}, Note: "ci"}, &d); err != nil {
		t.Fatalf("token.create: %v", err)
	}
	return d
}

func (f *secFixture) revokeToken(t *testing.T, id string) protocol.TokenRevokeData {
	t.Helper()
	var d protocol.TokenRevokeData
	if err := f.unix.Call(ctx(t), &protocol.TokenRevoke{Header: protocol.Header{Type: protocol.TypeTokenRevoke}, TokenID: id}, &d); err != nil {
		t.Fatalf("token.revoke: %v", err)
	}
	return d
}

func (f *secFixture) revokeSessions(t *testing.T) {
	t.Helper()
	if err := f.unix.Call(ctx(t), &protocol.WebSessionsRevoke{Header: protocol.Header{Type: protocol.TypeWebSessionsRevoke}, All: true}, nil); err != nil {
		t.Fatalf("web.sessions.revoke: %v", err)
	}
}

// upgrade is a WebSocket upgrade request as a browser on origin sends it,
// with the ticket.
func (f *secFixture) upgrade(origin, ticket string) rawReq {
	r := f.via(rawReq{path: "/ws", host: f.host, ws: true})
	if origin != "" {
		r = r.with("Origin", origin)
	}
	protos := "shard.v1"
	if ticket != "" {
		protos += ", ticket." + ticket
	}
	return r.with("Sec-WebSocket-Protocol", protos)
}

// checkHeaders asserts the headers every answer carries.
func checkHeaders(t *testing.T, resp rawResp) {
	t.Helper()
	for k, want := range map[string]string{
		"Content-Security-Policy": "frame-ancestors 'none'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
	} {
		if got := resp.header.Get(k); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want it to contain %q", k, got, want)
		}
	}
}

type secCase struct {
	name string
	req  func(t *testing.T, f *secFixture) rawReq
	want int
	// reason, when set, is a substring the refusal must give.
	reason string
	// check, when set, looks at the answer further.
	check func(t *testing.T, f *secFixture, resp rawResp)
}

func runSecCases(t *testing.T, f *secFixture, cases []secCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.rotate(tc.req(t, f)).do(t, f.addr)
			t.Logf("%d %s", resp.status, strings.TrimSpace(resp.body))
			if resp.status != tc.want {
				t.Fatalf("status %d (%s), want %d", resp.status, strings.TrimSpace(resp.body), tc.want)
			}
			if !strings.Contains(resp.body, tc.reason) {
				t.Fatalf("body %s does not give the reason %q", strings.TrimSpace(resp.body), tc.reason)
			}
			checkHeaders(t, resp)
			if tc.check != nil {
				tc.check(t, f, resp)
			}
		})
	}
}

// TestWebAuthLoopback is every accept/reject case of docs/protocol.md §4.1 in
// loopback mode, against the real HTTP server of a running daemon.
func TestWebAuthLoopback(t *testing.T) {
	// The gateway's credentials run on a manual clock, so that a ticket
	// expires when the test says so (the cases run one after another).
	const ticketTTL = time.Second
	clk := clock.NewManual(time.Now())
	f := newSecFixtureOpts(t, func(c *config.Config) { c.Gateway.TicketTTL = ticketTTL }, func(o *daemon.Options) {
		generous(o)
		o.GatewayClock = clk
	})
	port := f.addr[strings.LastIndexByte(f.addr, ':')+1:]
	otherPort := strconv.Itoa(mustAtoi(t, port) + 1)
	const evil = "http://evil.example"

	hostCase := func(name, host string) secCase {
		return secCase{name: "host " + name, want: http.StatusBadRequest, reason: "unexpected Host", req: func(t *testing.T, f *secFixture) rawReq {
			r := f.upgrade("", f.localTicket(t))
			r.host = host
			return r
		}}
	}
	cases := []secCase{
		// WebSocket upgrades with a browser ticket.
		{name: "ws no credentials", want: http.StatusUnauthorized, reason: "ticket is required", req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade(f.origin, "")
		}},
		{name: "ws forged ticket", want: http.StatusUnauthorized, reason: "invalid, expired or already used", req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade(f.origin, "forged-forged-forged")
		}},
		{name: "ws browser ticket from its origin", want: http.StatusSwitchingProtocols, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.upgrade(f.origin, f.bootstrap(t, cookie, f.origin))
		}, check: func(t *testing.T, _ *secFixture, resp rawResp) {
			if got := resp.header.Get("Sec-WebSocket-Protocol"); got != "shard.v1" {
				t.Errorf("selected subprotocol %q, want shard.v1", got)
			}
		}},
		{name: "ws browser ticket replayed", want: http.StatusUnauthorized, reason: "already used", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			ticket := f.bootstrap(t, cookie, f.origin)
			if got := f.rotate(f.upgrade(f.origin, ticket)).do(t, f.addr).status; got != http.StatusSwitchingProtocols {
				t.Fatalf("first use: %d", got)
			}
			return f.upgrade(f.origin, ticket)
		}},
		{name: "ws browser ticket expired", want: http.StatusUnauthorized, reason: "expired", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			ticket := f.bootstrap(t, cookie, f.origin)
			clk.Advance(ticketTTL)
			return f.upgrade(f.origin, ticket)
		}},
		{name: "ws browser ticket without Origin", want: http.StatusBadRequest, reason: "Origin header required", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.upgrade("", f.bootstrap(t, cookie, f.origin))
		}},
		{name: "ws browser ticket from a foreign origin", want: http.StatusBadRequest, reason: "Origin not allowed", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.upgrade(evil, f.bootstrap(t, cookie, f.origin))
		}},
		{name: "ws browser ticket of a revoked session", want: http.StatusUnauthorized, reason: "session revoked", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			ticket := f.bootstrap(t, cookie, f.origin)
			f.revokeSessions(t)
			return f.upgrade(f.origin, ticket)
		}},
		{name: "ws Origin null", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade("null", f.localTicket(t))
		}},
		{name: "ws Origin with a trailing slash", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade(f.origin+"/", f.localTicket(t))
		}},
		{name: "ws Origin https", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade("https://"+f.host, f.localTicket(t))
		}},
		{name: "ws Origin on another port", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade("http://127.0.0.1:"+otherPort, f.localTicket(t))
		}},
		{name: "ws Origin localhost", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade("http://localhost:"+port, f.localTicket(t))
		}},
		{name: "ws two Origin headers", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade(f.origin, f.localTicket(t)).with("Origin", f.origin)
		}},
		{name: "ws ticket without shard.v1", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			return rawReq{path: "/ws", host: f.host, ws: true}.with("Sec-WebSocket-Protocol", "ticket."+f.localTicket(t))
		}},
		{name: "ws two ticket entries", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade("", f.localTicket(t)).with("Sec-WebSocket-Protocol", "ticket."+f.localTicket(t))
		}},

		// Local (unix-minted) tickets: non-browser clients, no Origin.
		{name: "ws local ticket without Origin", want: http.StatusSwitchingProtocols, req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade("", f.localTicket(t))
		}},
		{name: "ws local ticket with the allowed Origin", want: http.StatusUnauthorized, reason: "another origin", req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade(f.origin, f.localTicket(t))
		}},

		// API tokens.
		{name: "ws bearer token", want: http.StatusSwitchingProtocols, req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade("", "").with("Authorization", "Bearer "+f.token(t).Token)
		}},
		{name: "ws bearer token with Origin", want: http.StatusBadRequest, reason: "without Origin", req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade(f.origin, "").with("Authorization", "Bearer "+f.token(t).Token)
		}},
		{name: "ws bearer token with a wrong secret", want: http.StatusUnauthorized, req: func(t *testing.T, f *secFixture) rawReq {
			tok := f.token(t).Token
			id, _, _ := strings.Cut(tok, ".")
			return f.upgrade("", "").with("Authorization", "Bearer "+id+"."+strings.Repeat("A", 43))
		}},
		{name: "ws basic auth", want: http.StatusUnauthorized, req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade("", "").with("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("a:"+f.token(t).Token)))
		}},
		{name: "ws revoked bearer token", want: http.StatusUnauthorized, reason: "revoked token", req: func(t *testing.T, f *secFixture) rawReq {
			tok := f.token(t)
			f.revokeToken(t, tok.TokenID)
			return f.upgrade("", "").with("Authorization", "Bearer "+tok.Token)
		}},
		{name: "ws bearer token and a ticket", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			return f.upgrade("", f.localTicket(t)).with("Authorization", "Bearer "+f.token(t).Token)
		}},

		// Host: exact, port included; no rebinding alias or alternate spelling.
		hostCase("localhost.", "localhost.:"+port),
		hostCase("localhost", "localhost:"+port),
		hostCase("127.1", "127.1:"+port),
		hostCase("mapped v6", "[::ffff:127.0.0.1]:"+port),
		hostCase("hex", "0x7f000001:"+port),
		hostCase("decimal", "2130706433:"+port),
		hostCase("octal", "0177.0.0.1:"+port),
		hostCase("trailing dot", "127.0.0.1.:"+port),
		hostCase("other port", "127.0.0.1:"+otherPort),
		hostCase("no port", "127.0.0.1"),
		hostCase("port with a leading zero", "127.0.0.1:0"+port),
		hostCase("rebinding name", "evil.example:"+port),
		hostCase("suffix", "127.0.0.1.evil.example:"+port),
		hostCase("prefix", "evil127.0.0.1:"+port),
		hostCase("v6 loopback", "[::1]:"+port),
		{name: "bootstrap under a rebinding Host", want: http.StatusBadRequest, reason: "unexpected Host", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			r := f.browser(http.MethodPost, "/bootstrap").with("Cookie", cookie)
			r.host = "evil.example:" + port
			return r
		}},

		// /bootstrap.
		{name: "bootstrap", want: http.StatusOK, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.browser(http.MethodPost, "/bootstrap").with("Cookie", cookie)
		}, check: func(t *testing.T, f *secFixture, resp rawResp) {
			if !strings.Contains(resp.body, `"url":"ws://`+f.host+`/ws"`) {
				t.Errorf("bootstrap body %s lacks the ws url", resp.body)
			}
		}},
		{name: "bootstrap without cookie", want: http.StatusUnauthorized, req: func(t *testing.T, f *secFixture) rawReq {
			return f.browser(http.MethodPost, "/bootstrap")
		}},
		{name: "bootstrap without Origin", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return rawReq{method: http.MethodPost, path: "/bootstrap", host: f.host}.with("Cookie", cookie)
		}},
		{name: "bootstrap from a foreign origin", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return rawReq{method: http.MethodPost, path: "/bootstrap", host: f.host}.with("Origin", evil).with("Cookie", cookie)
		}},
		{name: "bootstrap Secure cookie over http", want: http.StatusBadRequest, reason: "Secure session cookie over plain http", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			_, value, _ := strings.Cut(cookie, "=")
			return f.browser(http.MethodPost, "/bootstrap").with("Cookie", "__Host-shard_session="+value)
		}},
		{name: "bootstrap forged cookie", want: http.StatusUnauthorized, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.browser(http.MethodPost, "/bootstrap").with("Cookie", cookie[:len(cookie)-2]+"AA")
		}},
		{name: "bootstrap two session cookies", want: http.StatusUnauthorized, req: func(t *testing.T, f *secFixture) rawReq {
			_, a := f.enroll(t)
			_, b := f.enroll(t)
			return f.browser(http.MethodPost, "/bootstrap").with("Cookie", a+"; "+b)
		}},
		{name: "bootstrap revoked session", want: http.StatusUnauthorized, reason: "revoked", req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			f.revokeSessions(t)
			return f.browser(http.MethodPost, "/bootstrap").with("Cookie", cookie)
		}},
		{name: "bootstrap GET", want: http.StatusMethodNotAllowed, req: func(t *testing.T, f *secFixture) rawReq {
			_, cookie := f.enroll(t)
			return f.browser(http.MethodGet, "/bootstrap").with("Cookie", cookie)
		}},

		// /enroll.
		{name: "enroll page", want: http.StatusOK, req: func(t *testing.T, f *secFixture) rawReq {
			return rawReq{path: "/enroll", host: f.host}
		}, check: func(t *testing.T, _ *secFixture, resp rawResp) {
			csp := resp.header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'sha256-", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("page CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || !strings.Contains(resp.body, "history.replaceState") {
				t.Errorf("page or CSP not as expected: %q", csp)
			}
		}},
		{name: "enroll", want: http.StatusOK, req: func(t *testing.T, f *secFixture) rawReq {
			r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
			r.body = enrollBody(f.enrollCode(t).Code)
			return r
		}, check: func(t *testing.T, _ *secFixture, resp rawResp) {
			c := resp.header.Get("Set-Cookie")
			if !strings.HasPrefix(c, "shard_session=wsn-") || !strings.Contains(c, "HttpOnly") ||
				!strings.Contains(c, "SameSite=Strict") || !strings.Contains(c, "Path=/") || strings.Contains(c, "Secure") {
				t.Errorf("loopback cookie = %q, want shard_session; Path=/; HttpOnly; SameSite=Strict without Secure", c)
			}
		}},
		{name: "enroll code used twice", want: http.StatusUnauthorized, reason: "already used", req: func(t *testing.T, f *secFixture) rawReq {
			r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
			r.body = enrollBody(f.enrollCode(t).Code)
			if got := f.rotate(r).do(t, f.addr).status; got != http.StatusOK {
				t.Fatalf("first use: %d", got)
			}
			return r
		}},
		{name: "enroll unknown code", want: http.StatusUnauthorized, req: func(t *testing.T, f *secFixture) rawReq {
			r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
			r.body = enrollBody(strings.Repeat("A", 43))
			return r
		}},
		{name: "enroll without Origin", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			r := rawReq{method: http.MethodPost, path: "/enroll", host: f.host}.with("Content-Type", "application/json")
			r.body = enrollBody(f.enrollCode(t).Code)
			return r
		}},
		{name: "enroll form post", want: http.StatusUnsupportedMediaType, req: func(t *testing.T, f *secFixture) rawReq {
			r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/x-www-form-urlencoded")
			r.body = "code=" + f.enrollCode(t).Code
			return r
		}},
		{name: "enroll body too large", want: http.StatusRequestEntityTooLarge, req: func(t *testing.T, f *secFixture) rawReq {
			r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
			r.body = `{"code":"` + strings.Repeat("A", 8<<10) + `"}`
			return r
		}},
		{name: "enroll unknown field", want: http.StatusBadRequest, req: func(t *testing.T, f *secFixture) rawReq {
			r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
			r.body = `{"code":"` + f.enrollCode(t).Code + `","principal_id":"prn-x"}`
			return r
		}},
		{name: "enroll PUT", want: http.StatusMethodNotAllowed, req: func(t *testing.T, f *secFixture) rawReq {
			return f.browser(http.MethodPut, "/enroll")
		}},

		// Every other answer carries the headers too.
		{name: "unknown path", want: http.StatusNotFound, req: func(t *testing.T, f *secFixture) rawReq {
			return rawReq{path: "/admin", host: f.host}
		}},
		{name: "dashboard", want: http.StatusOK, req: func(t *testing.T, f *secFixture) rawReq {
			return rawReq{path: "/", host: f.host}
		}},
		{name: "dashboard under a rebinding Host", want: http.StatusBadRequest, reason: "unexpected Host", req: func(t *testing.T, f *secFixture) rawReq {
			return rawReq{path: "/", host: "evil.example:" + port}
		}},
		{name: "dashboard POST", want: http.StatusNotFound, req: func(t *testing.T, f *secFixture) rawReq {
			return rawReq{method: http.MethodPost, path: "/", host: f.host}
		}},
		{name: "metrics", want: http.StatusOK, req: func(t *testing.T, f *secFixture) rawReq {
			return rawReq{path: "/metrics", host: f.host}
		}},
		{name: "metrics under a rebinding Host", want: http.StatusBadRequest, reason: "unexpected Host", req: func(t *testing.T, f *secFixture) rawReq {
			return rawReq{path: "/metrics", host: "evil.example:" + port}
		}},
	}
	if len(cases) < 25 {
		t.Fatalf("only %d cases", len(cases))
	}
	runSecCases(t, f, cases)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
