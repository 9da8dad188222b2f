package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// WebPolicy is the web listener's security policy (docs/protocol.md §4.1).
// The zero value is loopback mode (§4.1.1): the pinned host is the listener's
// own address, the only allowed origin is http://<that address>, and no
// forwarded header is honored. config.Validate has already refused unsafe
// combinations; Listen checks the values again.
type WebPolicy struct {
	// Remote selects remote mode (§4.1.2). Default false.
	Remote bool
	// PublicHost is the pinned host[:port] of remote mode: the Host header
	// must name exactly it (an absent port meaning the effective scheme's
	// default). Required when Remote.
	PublicHost string
	// AllowedOrigins are the exact serialized origins of remote mode.
	// Required when Remote; ignored in loopback mode.
	AllowedOrigins []string
	// AllowInsecureRemote accepts requests whose effective scheme is http
	// in remote mode. Default false: they are refused.
	AllowInsecureRemote bool
	// TrustProxy is "loopback" (peer 127.0.0.1 or ::1), one IP literal, or
	// "" (default: forwarded headers are never honored).
	TrustProxy string
	// ForwardedProtoHeader and ForwardedHostHeader name the trusted proxy's
	// headers. Defaults X-Forwarded-Proto and X-Forwarded-Host.
	ForwardedProtoHeader, ForwardedHostHeader string
	// EnrollTTL is the lifetime of an enrollment code. Default 5m.
	EnrollTTL time.Duration
	// SessionTTL is the lifetime of a browser session. Default 720h.
	SessionTTL time.Duration
	// EnrollLimit and BootstrapLimit rate-limit POST /enroll and POST
	// /bootstrap per peer address. Defaults: a burst of 5, then one every
	// 10s (enroll); a burst of 20, then one every 500ms (bootstrap, which a
	// browser calls on every reconnect).
	EnrollLimit, BootstrapLimit RateLimit
}

// Defaults of WebPolicy and fixed limits of the web listener.
const (
	defaultEnrollTTL  = 5 * time.Minute
	defaultSessionTTL = 30 * 24 * time.Hour

	// maxHeaderBytes bounds a request's header block; maxBodyBytes the
	// body of POST /enroll and /bootstrap. No other route reads a body.
	maxHeaderBytes = 16 << 10
	maxBodyBytes   = 4 << 10

	// Session cookie names: the __Host- Secure form over https (D4), the
	// plain form over http (loopback, or --allow-insecure-remote).
	sessionCookieSecure = "__Host-shard_session"
	sessionCookiePlain  = "shard_session"

	trustLoopback = "loopback"
)

func withDefaults(p WebPolicy) WebPolicy {
	if p.ForwardedProtoHeader == "" {
		p.ForwardedProtoHeader = "X-Forwarded-Proto"
	}
	if p.ForwardedHostHeader == "" {
		p.ForwardedHostHeader = "X-Forwarded-Host"
	}
	if p.EnrollTTL <= 0 {
		p.EnrollTTL = defaultEnrollTTL
	}
	if p.SessionTTL <= 0 {
		p.SessionTTL = defaultSessionTTL
	}
	if p.EnrollLimit.Burst <= 0 || p.EnrollLimit.Every <= 0 {
		p.EnrollLimit = RateLimit{Burst: 5, Every: 10 * time.Second}
	}
	if p.BootstrapLimit.Burst <= 0 || p.BootstrapLimit.Every <= 0 {
		p.BootstrapLimit = RateLimit{Burst: 20, Every: 500 * time.Millisecond}
	}
	return p
}

// guard is the resolved policy every request to the web listener is
// checked against. It is immutable once Listen built it.
type guard struct {
	remote   bool
	insecure bool
	// pinned is the one Host accepted (DNS-rebinding defense).
	pinned protocol.HostPort
	// metricsHosts are the Hosts /metrics also answers local scrapers on:
	// the listener's own address and the loopback literals with its port.
	metricsHosts []protocol.HostPort
	// origins is the exact-origin allowlist.
	origins map[string]bool
	// trust is the trusted proxy's address; trustLoopback stands for
	// 127.0.0.1 and ::1.
	trust             netip.Addr
	trustLoopback     bool
	protoHdr, hostHdr string
	// baseURL is where a browser reaches the daemon (enrollment links).
	baseURL string
}

func newGuard(p WebPolicy, listener net.Addr) (*guard, error) {
	ap, err := netip.ParseAddrPort(listener.String())
	if err != nil {
		return nil, fmt.Errorf("%w: listener address %s: %w", ErrPolicy, listener, err)
	}
	own := protocol.HostPort{Host: ap.Addr().Unmap().String(), Port: int(ap.Port())}
	g := &guard{
		remote: p.Remote, insecure: p.AllowInsecureRemote,
		origins:  make(map[string]bool),
		protoHdr: http.CanonicalHeaderKey(p.ForwardedProtoHeader),
		hostHdr:  http.CanonicalHeaderKey(p.ForwardedHostHeader),
		metricsHosts: []protocol.HostPort{own,
			{Host: "127.0.0.1", Port: own.Port}, {Host: "::1", Port: own.Port}},
	}
	if !p.Remote {
		g.pinned = own
		o := protocol.Origin{Scheme: protocol.SchemeHTTP, HostPort: own}.String()
		g.origins[o] = true
		g.baseURL = o
		return g, nil
	}
	if g.pinned, err = protocol.ParseHostPort(p.PublicHost); err != nil {
		return nil, fmt.Errorf("%w: public host: %w", ErrPolicy, err)
	}
	for _, s := range p.AllowedOrigins {
		o, err := protocol.ParseOrigin(s)
		if err != nil {
			return nil, fmt.Errorf("%w: allowed origin: %w", ErrPolicy, err)
		}
		g.origins[s] = true
		if g.baseURL == "" && o.HostPort.Matches(g.pinned, o.Scheme) {
			g.baseURL = protocol.Origin{Scheme: o.Scheme, HostPort: g.pinned}.String()
		}
	}
	if len(g.origins) == 0 {
		return nil, fmt.Errorf("%w: remote mode needs allowed origins", ErrPolicy)
	}
	if g.baseURL == "" {
		scheme := protocol.SchemeHTTPS
		if p.AllowInsecureRemote && p.TrustProxy == "" {
			scheme = protocol.SchemeHTTP
		}
		g.baseURL = protocol.Origin{Scheme: scheme, HostPort: g.pinned}.String()
	}
	switch p.TrustProxy {
	case "":
	case trustLoopback:
		g.trustLoopback = true
	default:
		if g.trust, err = netip.ParseAddr(p.TrustProxy); err != nil {
			return nil, fmt.Errorf("%w: trust proxy: %w", ErrPolicy, err)
		}
		g.trust = g.trust.Unmap()
	}
	return g, nil
}

// trusts reports whether peer is the configured upstream proxy.
func (g *guard) trusts(peer netip.Addr) bool {
	if g.trustLoopback {
		return peer == netip.AddrFrom4([4]byte{127, 0, 0, 1}) || peer == netip.IPv6Loopback()
	}
	return g.trust.IsValid() && peer == g.trust
}

// reqInfo is what the guard established about a request.
type reqInfo struct {
	peer netip.Addr
	// scheme is the effective scheme: https iff the trusted proxy said so.
	scheme string
	// forwarded: the request came through the trusted proxy with its
	// forwarded headers.
	forwarded bool
}

func (i reqInfo) secure() bool { return i.scheme == protocol.SchemeHTTPS }

// refusal is a refused request: the status and a reason safe to show.
type refusal struct {
	status int
	reason string
}

func refuse(status int, reason string) *refusal { return &refusal{status: status, reason: reason} }

// check applies the Host, forwarded-header and transport rules. metrics
// relaxes the Host rule for local scrapers (and forbids anything else).
func (g *guard) check(r *http.Request, metrics bool) (reqInfo, *refusal) {
	info := reqInfo{scheme: protocol.SchemeHTTP}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		info.peer = ap.Addr().Unmap()
	}
	if g.trusts(info.peer) {
		if vals := r.Header.Values(g.protoHdr); len(vals) > 0 {
			p, err := protocol.ParseForwardedProto(vals)
			if err != nil {
				return info, refuse(http.StatusBadRequest, "malformed "+g.protoHdr)
			}
			info.scheme, info.forwarded = p, true
		}
		if vals := r.Header.Values(g.hostHdr); len(vals) > 0 {
			fh, err := protocol.ParseForwardedHost(vals)
			if err != nil || !fh.Matches(g.pinned, info.scheme) {
				return info, refuse(http.StatusBadRequest, g.hostHdr+" does not match the public host")
			}
			info.forwarded = true
		}
	}
	host, err := protocol.ParseHostPort(r.Host)
	ok := err == nil && host.Matches(g.pinned, info.scheme)
	if metrics {
		if g.remote && (!info.peer.IsLoopback() || info.forwarded) {
			return info, refuse(http.StatusForbidden, "metrics are served to local scrapers only")
		}
		for _, h := range g.metricsHosts {
			ok = ok || (err == nil && host.Matches(h, protocol.SchemeHTTP))
		}
		if !ok {
			return info, refuse(http.StatusBadRequest, "unexpected Host")
		}
		return info, nil
	}
	if !ok {
		return info, refuse(http.StatusBadRequest, "unexpected Host")
	}
	if g.remote && !info.secure() && !g.insecure {
		return info, refuse(http.StatusBadRequest, "plaintext request refused: remote mode requires https (or --allow-insecure-remote)")
	}
	return info, nil
}

// originAllowed reports whether the request carries exactly one Origin
// and it is in the allowlist; it returns that origin.
func (g *guard) originAllowed(r *http.Request) (string, *refusal) {
	vals := r.Header.Values("Origin")
	switch {
	case len(vals) == 0:
		return "", refuse(http.StatusBadRequest, "Origin header required")
	case len(vals) > 1:
		return "", refuse(http.StatusBadRequest, "more than one Origin header")
	case !g.origins[vals[0]]:
		return "", refuse(http.StatusBadRequest, "Origin not allowed")
	}
	return vals[0], nil
}

// setSecurityHeaders sets the headers every answer of the web listener
// carries, whatever the route or outcome.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// webHandler is the web listener's root: security headers on every
// answer, then the routes.
func (g *Gateway) webHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ws", g.route("ws", false, g.serveWS))
	mux.Handle("/enroll", g.route("enroll", false, g.serveEnroll))
	mux.Handle("/bootstrap", g.route("bootstrap", false, g.serveBootstrap))
	if g.cfg.Metrics != nil {
		// /metrics needs no ticket, unlike /ws: it carries counts, states
		// and latencies only (never a prompt, task, path, agent id or
		// ticket), and Prometheus scrapers cannot mint single-use tickets.
		// It still checks Host (DNS rebinding), and in remote mode it
		// answers local scrapers only, never through the proxy.
		metrics := g.cfg.Metrics.Handler()
		mux.Handle("/metrics", g.route("metrics", true, func(w http.ResponseWriter, r *http.Request, info reqInfo) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				g.refuse(w, r, "metrics", info, refuse(http.StatusMethodNotAllowed, "method not allowed"), "GET, HEAD")
				return
			}
			metrics.ServeHTTP(w, r)
		}))
	}
	mux.Handle("/", g.route("other", false, func(w http.ResponseWriter, r *http.Request, info reqInfo) {
		if g.cfg.Page != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			g.cfg.Page.ServeHTTP(w, r)
			return
		}
		g.refuse(w, r, "other", info, refuse(http.StatusNotFound, "not found"), "")
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		mux.ServeHTTP(w, r)
	})
}

// route checks a request with the guard before handing it to h.
func (g *Gateway) route(name string, metrics bool, h func(http.ResponseWriter, *http.Request, reqInfo)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, ref := g.guard.check(r, metrics)
		if ref != nil {
			g.refuse(w, r, name, info, ref, "")
			return
		}
		h(w, r, info)
	})
}

// refuse answers a refused request with {"error": reason} and logs it
// (route name, status, reason and peer; never a header value).
func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, route string, info reqInfo, ref *refusal, allow string) {
	level := slog.LevelInfo
	if ref.status == http.StatusNotFound || ref.status == http.StatusTooManyRequests {
		level = slog.LevelDebug
	}
	g.log.Log(r.Context(), level, "web request refused", "route", route, "method", r.Method,
		"status", ref.status, "reason", ref.reason, "peer", info.peer.String())
	if allow != "" {
		w.Header().Set("Allow", allow)
	}
	if ref.status == http.StatusUnauthorized && route == "ws" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="shard"`)
	}
	writeJSON(w, ref.status, map[string]string{"error": ref.reason})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// limited applies a rate limiter to the request's peer and its origin,
// which the caller has already checked against the allowlist: a request
// refused for its Origin spends nothing (see limiter).
func limited(l *limiter, info reqInfo, origin string, w http.ResponseWriter) *refusal {
	ok, wait := l.allow(info.peer, origin)
	if ok {
		return nil
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
	return refuse(http.StatusTooManyRequests, "too many attempts; retry later")
}

// serveEnroll serves the enrollment page (GET) and exchanges a code for a
// session (POST).
func (g *Gateway) serveEnroll(w http.ResponseWriter, r *http.Request, info reqInfo) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		w.Header().Set("Content-Security-Policy", g.enrollCSP)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(g.enrollPage)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(g.enrollPage)
		}
		return
	case http.MethodPost:
	default:
		g.refuse(w, r, "enroll", info, refuse(http.StatusMethodNotAllowed, "method not allowed"), "GET, HEAD, POST")
		return
	}
	origin, ref := g.guard.originAllowed(r)
	if ref != nil {
		g.refuse(w, r, "enroll", info, ref, "")
		return
	}
	if ref := limited(g.enrollLimit, info, origin, w); ref != nil {
		g.refuse(w, r, "enroll", info, ref, "")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		g.refuse(w, r, "enroll", info, refuse(http.StatusUnsupportedMediaType, "Content-Type must be application/json"), "")
		return
	}
	var body struct {
		Code string `json:"code"`
	}
	if ref := decodeBody(w, r, &body); ref != nil {
		g.refuse(w, r, "enroll", info, ref, "")
		return
	}
	cookie, ws, err := g.auth.enroll(body.Code, origin, r.UserAgent(), info.secure())
	switch {
	case errors.Is(err, ErrBadCredential):
		g.refuse(w, r, "enroll", info, refuse(http.StatusUnauthorized, "enrollment code is invalid, expired or already used"), "")
		return
	case err != nil:
		g.log.Error("enroll browser", "err", err)
		g.refuse(w, r, "enroll", info, refuse(http.StatusInternalServerError, "internal error"), "")
		return
	}
	name := sessionCookiePlain
	if ws.Secure {
		name = sessionCookieSecure
	}
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: cookie, Path: "/", HttpOnly: true, Secure: ws.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(g.cfg.Web.SessionTTL / time.Second),
	})
	g.log.Info("browser enrolled", "principal_id", ws.PrincipalID, "browser_id", ws.BrowserID,
		"session_id", ws.ID, "secure", ws.Secure, "peer", info.peer.String())
	writeJSON(w, http.StatusOK, map[string]any{
		"principal_id": ws.PrincipalID, "browser_id": ws.BrowserID, "session_id": ws.ID, "expires_at": ws.ExpiresAt,
	})
}

// decodeBody decodes a small JSON object body, strictly.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) *refusal {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return refuse(http.StatusRequestEntityTooLarge, "request body too large")
		}
		return refuse(http.StatusBadRequest, "malformed JSON body")
	}
	if dec.More() {
		return refuse(http.StatusBadRequest, "malformed JSON body")
	}
	return nil
}

// serveBootstrap mints a WS ticket for a browser session (POST).
func (g *Gateway) serveBootstrap(w http.ResponseWriter, r *http.Request, info reqInfo) {
	if r.Method != http.MethodPost {
		g.refuse(w, r, "bootstrap", info, refuse(http.StatusMethodNotAllowed, "method not allowed"), "POST")
		return
	}
	origin, ref := g.guard.originAllowed(r)
	if ref != nil {
		g.refuse(w, r, "bootstrap", info, ref, "")
		return
	}
	if ref := limited(g.bootstrapLimit, info, origin, w); ref != nil {
		g.refuse(w, r, "bootstrap", info, ref, "")
		return
	}
	if r.ContentLength > maxBodyBytes {
		g.refuse(w, r, "bootstrap", info, refuse(http.StatusRequestEntityTooLarge, "request body too large"), "")
		return
	}
	name := sessionCookieSecure
	if !info.secure() {
		// D4: a Secure-form cookie over plaintext means a proxy that
		// lost its TLS or a cookie carried across schemes: no ticket.
		for _, c := range r.Cookies() {
			if c.Name == sessionCookieSecure {
				g.refuse(w, r, "bootstrap", info, refuse(http.StatusBadRequest, "Secure session cookie over plain http"), "")
				return
			}
		}
		name = sessionCookiePlain
	}
	var value string
	n := 0
	for _, c := range r.Cookies() {
		if c.Name == name {
			value, n = c.Value, n+1
		}
	}
	if n != 1 {
		reason := "session cookie required; enroll this browser with shardctl web enroll"
		if n > 1 {
			reason = "more than one session cookie"
		}
		g.refuse(w, r, "bootstrap", info, refuse(http.StatusUnauthorized, reason), "")
		return
	}
	ws, err := g.auth.session(value, info.secure())
	switch {
	case errors.Is(err, ErrBadCredential):
		g.refuse(w, r, "bootstrap", info, refuse(http.StatusUnauthorized, "session is invalid, expired or revoked; enroll this browser again"), "")
		return
	case err != nil:
		g.log.Error("check browser session", "err", err)
		g.refuse(w, r, "bootstrap", info, refuse(http.StatusInternalServerError, "internal error"), "")
		return
	}
	ticket, exp := g.tickets.MintBound(TicketBinding{Origin: origin, PrincipalID: ws.PrincipalID, SessionID: ws.ID})
	scheme := "ws"
	if info.secure() {
		scheme = "wss"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"ticket":     ticket,
		"expires_at": exp.UnixMilli(),
		"url":        scheme + "://" + r.Host + "/ws",
		"protocols":  []string{protocol.Subprotocol, protocol.TicketProtocolPrefix + ticket},
	})
}

// wsAuth decides a WebSocket upgrade (the decision table is in doc.go)
// and returns the credential the connection is opened under.
func (g *Gateway) wsAuth(r *http.Request) (credential, *refusal) {
	shard, ticket, err := protocol.ParseWSProtocols(r.Header.Values("Sec-WebSocket-Protocol"))
	if err != nil {
		return credential{}, refuse(http.StatusBadRequest, "more than one ticket entry")
	}
	origin := ""
	if len(r.Header.Values("Origin")) > 0 {
		var ref *refusal
		if origin, ref = g.guard.originAllowed(r); ref != nil {
			return credential{}, ref
		}
	}
	if authz := r.Header.Values("Authorization"); len(authz) > 0 {
		switch {
		case origin != "":
			return credential{}, refuse(http.StatusBadRequest, "a bearer token is accepted only on an upgrade without Origin")
		case ticket != "":
			return credential{}, refuse(http.StatusBadRequest, "both a ticket and a bearer token")
		case !shard:
			return credential{}, refuse(http.StatusBadRequest, "the shard.v1 subprotocol is required")
		}
		tok, err := protocol.ParseBearer(authz)
		if err != nil {
			return credential{}, refuse(http.StatusUnauthorized, "malformed Authorization header")
		}
		c, err := g.auth.token(tok)
		if err != nil {
			if !errors.Is(err, ErrBadCredential) {
				g.log.Error("check api token", "err", err)
			}
			return credential{}, refuse(http.StatusUnauthorized, "invalid or revoked token")
		}
		return credential{kind: credToken, id: c.ID, principal: c.PrincipalID}, nil
	}
	if ticket == "" {
		return credential{}, refuse(http.StatusUnauthorized, "unauthorized: a valid single-use ticket is required")
	}
	if !shard {
		return credential{}, refuse(http.StatusBadRequest, "the shard.v1 subprotocol is required")
	}
	b, ok := g.tickets.Take(ticket)
	switch {
	case !ok:
		return credential{}, refuse(http.StatusUnauthorized, "unauthorized: ticket is invalid, expired or already used")
	case b.Origin != origin && origin == "":
		return credential{}, refuse(http.StatusBadRequest, "Origin header required")
	case b.Origin != origin:
		return credential{}, refuse(http.StatusUnauthorized, "unauthorized: ticket was issued to another origin")
	case b.SessionID == "":
		return credential{kind: credLocal}, nil
	case !g.auth.sessionLive(b.SessionID):
		return credential{}, refuse(http.StatusUnauthorized, "unauthorized: session revoked or expired")
	}
	return credential{kind: credSession, id: b.SessionID, principal: b.PrincipalID}, nil
}
