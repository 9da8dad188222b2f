package daemon_test

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

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
	return f.via(rawReq{method: method, path: path, host: f.host}.with("Origin", f.origin))
}

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

// TestWebAuthLoopback is every accept/reject case of spec §4.1 in loopback
// mode, against the real HTTP server of a running daemon.
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

// Remote mode behind a trusted reverse proxy (spec §4.1.2). The proxy is
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

// TestRevokedTokenClosesOpenConnection: revocation takes effect on
// connections already open, with a policy-violation close.
func TestRevokedTokenClosesOpenConnection(t *testing.T) {
	f := newSecFixture(t, nil)
	tok := f.token(t)
	ws, err := client.DialWebSocketToken(ctx(t), wsURL(f.h), tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	var list protocol.TokenListData
	if err := f.unix.Call(ctx(t), &protocol.TokenList{Header: protocol.Header{Type: protocol.TypeTokenList}}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Tokens) != 1 || list.Tokens[0].Connections != 1 || list.Tokens[0].LastUsedAt == 0 {
		t.Fatalf("token.list = %+v, want one used token with one connection", list.Tokens)
	}
	if got := f.revokeToken(t, tok.TokenID); got.ClosedConnections != 1 || got.RevokedAt == 0 {
		t.Fatalf("token.revoke = %+v, want one closed connection", got)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for range ws.Events() {
		}
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection opened with a revoked token is still open")
	}
	if code := websocket.CloseStatus(ws.Err()); code != websocket.StatusPolicyViolation {
		t.Fatalf("close status %v (%v), want policy violation", code, ws.Err())
	}
	if _, err := client.DialWebSocketToken(ctx(t), wsURL(f.h), tok.Token); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("dial with the revoked token: %v, want HTTP 401", err)
	}
	// Revoking again is harmless; an unknown id is NOT_FOUND.
	f.revokeToken(t, tok.TokenID)
	err = f.unix.Call(ctx(t), &protocol.TokenRevoke{Header: protocol.Header{Type: protocol.TypeTokenRevoke}, TokenID: "tok-unknown"}, nil)
	if protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("revoke unknown: %v, want NOT_FOUND", err)
	}
}

// TestRevokedSessionClosesBrowserConnection: the same for a browser
// session, through a real WebSocket client sending Origin like a browser.
func TestRevokedSessionClosesBrowserConnection(t *testing.T) {
	f := newSecFixture(t, nil)
	_, cookie := f.enroll(t)
	ticket := f.bootstrap(t, cookie, f.origin)
	c, _, err := websocket.Dial(ctx(t), wsURL(f.h), &websocket.DialOptions{
		Subprotocols: []string{"shard.v1", "ticket." + ticket},
		HTTPHeader:   http.Header{"Origin": []string{f.origin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if _, _, err := c.Read(ctx(t)); err != nil { // hello
		t.Fatal(err)
	}
	var list protocol.WebSessionsListData
	if err := f.unix.Call(ctx(t), &protocol.WebSessionsList{Header: protocol.Header{Type: protocol.TypeWebSessionsList}}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].Connections != 1 || list.Sessions[0].Note != "test" || list.Sessions[0].Secure {
		t.Fatalf("web.sessions.list = %+v", list.Sessions)
	}
	var rev protocol.WebSessionsRevokeData
	if err := f.unix.Call(ctx(t), &protocol.WebSessionsRevoke{Header: protocol.Header{Type: protocol.TypeWebSessionsRevoke},
		SessionID: list.Sessions[0].SessionID}, &rev); err != nil {
		t.Fatal(err)
	}
	if rev.ClosedConnections != 1 {
		t.Fatalf("revoke = %+v, want one closed connection", rev)
	}
	for {
		if _, _, err = c.Read(ctx(t)); err != nil {
			break
		}
	}
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("read after revoke: %v, want a policy-violation close", err)
	}
}

// TestSecurityCommandsAreLocalOnly: a WebSocket client, even an
// authenticated one, cannot enroll browsers or manage tokens.
func TestSecurityCommandsAreLocalOnly(t *testing.T) {
	f := newSecFixture(t, nil)
	ws, err := client.DialWebSocketToken(ctx(t), wsURL(f.h), f.token(t).Token)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, cmd := range []protocol.Typed{
		&protocol.WebEnroll{Header: protocol.Header{Type: protocol.TypeWebEnroll}},
		&protocol.WebSessionsList{Header: protocol.Header{Type: protocol.TypeWebSessionsList}},
		&protocol.WebSessionsRevoke{Header: protocol.Header{Type: protocol.TypeWebSessionsRevoke}, All: true},
		&protocol.TokenCreate{Header: protocol.Header{Type: protocol.TypeTokenCreate}, Note: "x"},
		&protocol.TokenList{Header: protocol.Header{Type: protocol.TypeTokenList}},
		&protocol.TokenRevoke{Header: protocol.Header{Type: protocol.TypeTokenRevoke}, TokenID: "tok-x"},
	} {
		if _, err := ws.Request(ctx(t), cmd); protocol.CodeOf(err) != protocol.CodePermissionDenied {
			t.Errorf("%s over WebSocket: %v, want PERMISSION_DENIED", cmd.Head().Type, err)
		}
	}
}

// TestNoSecretPersistedOrLogged plants one of every secret — an
// enrollment code, a session cookie, a browser ticket, a ws.ticket ticket
// and an API token — uses each (and misuses some, so that refusals are
// logged too), then scans the database file, every file under the home and
// the debug-level log for any of them.
func TestNoSecretPersistedOrLogged(t *testing.T) {
	f := newSecFixture(t, nil)
	code := f.enrollCode(t)
	r := f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json")
	r.body = enrollBody(code.Code)
	resp := f.rotate(r).do(t, f.addr)
	if resp.status != http.StatusOK {
		t.Fatalf("enroll: %d", resp.status)
	}
	cookie, _, _ := strings.Cut(resp.header.Get("Set-Cookie"), ";")
	_, cookieValue, _ := strings.Cut(cookie, "=")
	ticket := f.bootstrap(t, cookie, f.origin)
	if got := f.rotate(f.upgrade(f.origin, ticket)).do(t, f.addr).status; got != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", got)
	}
	local := f.localTicket(t)
	tok := f.token(t)
	ws, err := client.DialWebSocketToken(ctx(t), wsURL(f.h), tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	ws.Close()
	// Misuse: replays, a wrong origin, a revoked token.
	for _, r := range []rawReq{
		f.browser(http.MethodPost, "/enroll").with("Content-Type", "application/json"),
		f.upgrade(f.origin, ticket),
		f.upgrade(f.origin, local),
		f.upgrade("", "").with("Authorization", "Bearer "+tok.Token+"x"),
	} {
		if r.path == "/enroll" {
			r.body = enrollBody(code.Code)
		}
		f.rotate(r).do(t, f.addr)
	}
	f.revokeToken(t, tok.TokenID)
	f.rotate(f.upgrade("", "").with("Authorization", "Bearer "+tok.Token)).do(t, f.addr)

	f.h.d.Shutdown(false)
	secrets := map[string]string{
		"enrollment code": code.Code,
		"session cookie":  secretPart(cookieValue),
		"browser ticket":  ticket,
		"local ticket":    local,
		"api token":       secretPart(tok.Token),
	}
	files := filesUnder(t, f.h.cfg.Home)
	if _, ok := files[f.h.cfg.DBPath()]; !ok {
		t.Fatalf("no database among %d files", len(files))
	}
	// The file really is what was written: it holds the cookie's hash.
	sum := sha256.Sum256([]byte(cookieValue))
	if !strings.Contains(string(files[f.h.cfg.DBPath()]), hex.EncodeToString(sum[:])) {
		t.Fatal("the database does not hold the session's hash; the scan would prove nothing")
	}
	files["daemon log"] = []byte(f.h.log.String())
	for what, secret := range secrets {
		if len(secret) < 40 {
			t.Fatalf("%s %q is not a full secret", what, secret)
		}
		for path, content := range files {
			if strings.Contains(string(content), secret) {
				t.Errorf("%s contains the %s", path, what)
			}
		}
	}
}

// secretPart is the random part of an "<id>.<secret>" credential: the id
// may be logged, the secret never.
func secretPart(v string) string {
	_, s, _ := strings.Cut(v, ".")
	return s
}

// filesUnder reads every regular file under dir (sockets are skipped).
func filesUnder(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHomeMustBeOwnerOnly: a home, database or config file that others
// can write is refused at startup; one others can only read is tightened.
func TestHomeMustBeOwnerOnly(t *testing.T) {
	newHome := func(t *testing.T) *config.Config {
		cfg := newConfig(t)
		if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	refused := func(t *testing.T, cfg *config.Config, what string) {
		t.Helper()
		d, err := daemon.New(cfg, daemon.Options{})
		if err == nil {
			d.Shutdown(true)
			t.Fatalf("started with a %s", what)
		}
		if !errors.Is(err, daemon.ErrNotPrivate) || !strings.Contains(err.Error(), "chmod") {
			t.Fatalf("%s: err = %v, want ErrNotPrivate with a chmod hint", what, err)
		}
	}
	t.Run("group-writable home", func(t *testing.T) {
		cfg := newHome(t)
		if err := os.Chmod(cfg.Home, 0o770); err != nil {
			t.Fatal(err)
		}
		refused(t, cfg, "group-writable home")
	})
	t.Run("world-writable database", func(t *testing.T) {
		cfg := newHome(t)
		if err := os.WriteFile(cfg.DBPath(), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(cfg.DBPath(), 0o666); err != nil {
			t.Fatal(err)
		}
		refused(t, cfg, "world-writable database")
	})
	t.Run("group-writable config", func(t *testing.T) {
		cfg := newHome(t)
		if err := os.WriteFile(cfg.ConfigFile, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(cfg.ConfigFile, 0o620); err != nil {
			t.Fatal(err)
		}
		refused(t, cfg, "group-writable config")
	})
	t.Run("readable home is tightened", func(t *testing.T) {
		cfg := newHome(t)
		if err := os.Chmod(cfg.Home, 0o755); err != nil {
			t.Fatal(err)
		}
		h := startWith(t, cfg)
		for path, want := range map[string]fs.FileMode{cfg.Home: 0o700, cfg.DBPath(): 0o600, cfg.SocketPath(): 0o600} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("%s has mode %04o, want %04o", path, got, want)
			}
		}
		_ = h
	})
}

// TestShardDRefusesUnsafeRemoteFlags runs the real binary: an incomplete
// remote configuration stops it before it listens, naming the flag.
func TestShardDRefusesUnsafeRemoteFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--web-host=0.0.0.0"}, "--public-host"},
		{[]string{"--web-host=0.0.0.0", "--public-host=shard.lan:7420"}, "--allowed-origin"},
		{[]string{"--web-host=0.0.0.0", "--public-host=shard.lan:7420", "--allowed-origin=http://shard.lan:7420"}, "--allow-insecure-remote"},
		{[]string{"--trust-proxy=loopback", "--public-host=shard.example.test"}, "--allowed-origin"},
	} {
		home := filepath.Join(shortTemp(t), "home")
		cmd := exec.Command(runtimeBin, append([]string{"--home=" + home, "--web-port=0"}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("shardd %q started", tc.args)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("shardd %q: %s\nwant it to name %s", tc.args, out, tc.want)
		}
	}
}

// TestExpiredSessionClosesBrowserConnection: a session that expires while
// its connection is open loses the connection at the next keepalive.
func TestExpiredSessionClosesBrowserConnection(t *testing.T) {
	f := newSecFixture(t, func(c *config.Config) {
		c.Web.SessionTTL = 1500 * time.Millisecond
		c.Gateway.PingInterval = 100 * time.Millisecond
	})
	_, cookie := f.enroll(t)
	ticket := f.bootstrap(t, cookie, f.origin)
	c, _, err := websocket.Dial(ctx(t), wsURL(f.h), &websocket.DialOptions{
		Subprotocols: []string{"shard.v1", "ticket." + ticket},
		HTTPHeader:   http.Header{"Origin": []string{f.origin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	opened := time.Now()
	for {
		if _, _, err = c.Read(ctx(t)); err != nil {
			break
		}
	}
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("read: %v, want a policy-violation close", err)
	}
	if time.Since(opened) > 5*time.Second {
		t.Fatalf("closed only after %s", time.Since(opened))
	}
}
