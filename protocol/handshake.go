package protocol

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The grammar of the WebSocket handshake (docs/protocol.md §4.1): what the
// daemon reads from the upgrade request before any frame is exchanged. The
// parsers here are deliberately narrower than the RFCs: a value is either in
// the one canonical spelling a browser produces, or it is refused, so that
// two different strings can never name the same host or origin. Callers
// compare the canonical results as plain strings.

// Subprotocols of the WebSocket upgrade.
const (
	// Subprotocol is the WebSocket subprotocol of Shard v0.1; an upgrade
	// must offer it.
	Subprotocol = "shard.v1"
	// TicketProtocolPrefix marks the ticket entry of
	// Sec-WebSocket-Protocol: "ticket.<ticket>".
	TicketProtocolPrefix = "ticket."
)

func handshakeErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrHandshake}, args...)...)
}

// Scheme defaults.
const (
	SchemeHTTP  = "http"
	SchemeHTTPS = "https"
)

// DefaultPort returns 80 for http and 443 for https (and for ws/wss), 0 for
// anything else.
func DefaultPort(scheme string) int {
	switch scheme {
	case SchemeHTTP, "ws":
		return 80
	case SchemeHTTPS, "wss":
		return 443
	}
	return 0
}

// HostPort is a parsed Host header, X-Forwarded-Host value or origin host:
// a lowercase host name, a canonical dotted-quad IPv4 address, or a
// canonical IPv6 address (without brackets), and a port (0 when absent).
type HostPort struct {
	Host string
	Port int
}

// String serializes h the way a browser writes a Host header: IPv6
// bracketed, the port only when present.
func (h HostPort) String() string {
	host := h.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if h.Port == 0 {
		return host
	}
	return host + ":" + strconv.Itoa(h.Port)
}

// Matches reports whether h names exactly want when the request's scheme is
// scheme: the same host spelling, and the same port once an absent port is
// read as the scheme's default.
func (h HostPort) Matches(want HostPort, scheme string) bool {
	port := func(p int) int {
		if p == 0 {
			return DefaultPort(scheme)
		}
		return p
	}
	return h.Host == want.Host && port(h.Port) == port(want.Port)
}

// ParseHostPort parses uri-host [":" port] in its canonical spelling only.
// The host is one of:
//
//   - a DNS name: dot-separated labels of letters, digits and hyphens (no
//     label empty, none starting or ending with a hyphen, no trailing dot),
//     lowered to ASCII lowercase; a name whose last label is numeric or hex
//     ("127.1", "0x7f000001") is refused, since URL parsers read it as an
//     IPv4 address;
//   - a dotted-quad IPv4 address in canonical form (no leading zeros);
//   - an IPv6 address in brackets, in canonical (RFC 5952) form, without
//     a zone.
//
// The port, when present, is 1..65535 in decimal without leading zeros.
// Anything else — userinfo, a path, spaces, an empty port — is an error.
func ParseHostPort(s string) (HostPort, error) {
	if s == "" {
		return HostPort{}, handshakeErr("empty host")
	}
	if len(s) > 262 { // 253 for a name, [IPv6] is shorter, plus ":65535"
		return HostPort{}, handshakeErr("host too long")
	}
	var host, port string
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return HostPort{}, handshakeErr("unclosed IPv6 bracket")
		}
		host, port = s[1:end], s[end+1:]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" || a.String() != host {
			return HostPort{}, handshakeErr("%q is not a canonical IPv6 address", host)
		}
		if port != "" && port[0] != ':' {
			return HostPort{}, handshakeErr("junk after IPv6 address")
		}
	} else {
		host, port, _ = strings.Cut(s, ":")
		if port != "" || strings.HasSuffix(s, ":") {
			port = ":" + port
		}
		var err error
		if host, err = parseHostName(host); err != nil {
			return HostPort{}, err
		}
	}
	hp := HostPort{Host: host}
	if port != "" {
		n, err := parsePort(port[1:])
		if err != nil {
			return HostPort{}, err
		}
		hp.Port = n
	}
	return hp, nil
}

// parseHostName accepts a canonical dotted-quad IPv4 address or a DNS name
// and returns it lowercased.
func parseHostName(h string) (string, error) {
	if h == "" {
		return "", handshakeErr("empty host")
	}
	if len(h) > 253 {
		return "", handshakeErr("host name too long")
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if !a.Is4() || a.String() != h {
			return "", handshakeErr("%q is not a canonical IPv4 address", h)
		}
		return h, nil
	}
	lower := strings.ToLower(h)
	labels := strings.Split(lower, ".")
	for _, l := range labels {
		if l == "" {
			return "", handshakeErr("empty label in host %q (a trailing dot is not allowed)", h)
		}
		if len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", handshakeErr("bad label in host %q", h)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", handshakeErr("bad character in host %q", h)
			}
		}
	}
	if last := labels[len(labels)-1]; isNumericLabel(last) {
		return "", handshakeErr("%q is not a canonical IPv4 address", h)
	}
	return lower, nil
}

// isNumericLabel reports whether a URL parser (WHATWG "ends in a number")
// would read the label as part of an IPv4 address: all digits, or 0x hex.
func isNumericLabel(l string) bool {
	if strings.HasPrefix(l, "0x") {
		for i := 2; i < len(l); i++ {
			c := l[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

func parsePort(p string) (int, error) {
	if p == "" || len(p) > 5 || (p[0] == '0') {
		return 0, handshakeErr("bad port %q", p)
	}
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return 0, handshakeErr("bad port %q", p)
		}
		n = n*10 + int(p[i]-'0')
	}
	if n < 1 || n > 65535 {
		return 0, handshakeErr("port %q out of range", p)
	}
	return n, nil
}

// Origin is a serialized web origin (RFC 6454 §6.2): scheme, host, port.
type Origin struct {
	Scheme string // http or https
	HostPort
}

// String serializes o as a browser does in the Origin header: the port
// only when it is not the scheme's default.
func (o Origin) String() string {
	hp := o.HostPort
	if hp.Port == DefaultPort(o.Scheme) {
		hp.Port = 0
	}
	return o.Scheme + "://" + hp.String()
}

// ParseOrigin parses an Origin header value or an allowlist entry. Only the
// canonical serialization is accepted: a lowercase http or https scheme,
// "://", a host in ParseHostPort's grammar written in lowercase, and a port
// only when it is not the scheme's default; no path (not even "/"), query,
// fragment or userinfo. "null" and "*" are not origins. For every accepted
// s, ParseOrigin(s).String() == s, so callers may compare origins as
// strings.
func ParseOrigin(s string) (Origin, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return Origin{}, handshakeErr("origin %q has no scheme", s)
	}
	if scheme != SchemeHTTP && scheme != SchemeHTTPS {
		return Origin{}, handshakeErr("origin %q: scheme must be http or https", s)
	}
	hp, err := ParseHostPort(rest)
	if err != nil {
		return Origin{}, fmt.Errorf("origin %q: %w", s, err)
	}
	o := Origin{Scheme: scheme, HostPort: hp}
	if o.String() != s {
		return Origin{}, handshakeErr("origin %q is not in canonical form (want %q)", s, o.String())
	}
	return o, nil
}

// ParseWSProtocols reads every Sec-WebSocket-Protocol header value: whether
// shard.v1 is offered, and the ticket of the one "ticket.<ticket>" entry
// ("" when there is none). Two ticket entries are an error.
func ParseWSProtocols(values []string) (shard bool, ticket string, err error) {
	seen := false
	for _, v := range values {
		for p := range strings.SplitSeq(v, ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == Subprotocol:
				shard = true
			case strings.HasPrefix(p, TicketProtocolPrefix):
				if seen {
					return false, "", handshakeErr("more than one ticket entry")
				}
				seen = true
				ticket = strings.TrimPrefix(p, TicketProtocolPrefix)
			}
		}
	}
	return shard, ticket, nil
}

// ParseBearer reads the Authorization header values of a request carrying
// an API token: exactly one value, the scheme "Bearer" (any case), one or
// more spaces, and a token68 (RFC 7235 §2.1) credential. It returns the
// credential.
func ParseBearer(values []string) (string, error) {
	if len(values) != 1 {
		return "", handshakeErr("want exactly one Authorization header, got %d", len(values))
	}
	scheme, cred, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", handshakeErr("Authorization scheme is not Bearer")
	}
	cred = strings.TrimLeft(cred, " ")
	if cred == "" || len(cred) > 512 {
		return "", handshakeErr("bad bearer credential length")
	}
	body := strings.TrimRight(cred, "=")
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			return "", handshakeErr("bad character in bearer credential")
		}
	}
	if body == "" {
		return "", handshakeErr("bad bearer credential")
	}
	return cred, nil
}

// ParseForwardedProto reads the values of a forwarded-proto header
// (X-Forwarded-Proto by default) from a trusted proxy: exactly one value,
// "http" or "https" in any case, returned lowercase. A comma-separated
// chain is refused: with one trusted upstream there is one hop.
func ParseForwardedProto(values []string) (string, error) {
	if len(values) != 1 {
		return "", handshakeErr("want one forwarded proto, got %d headers", len(values))
	}
	switch p := strings.ToLower(strings.TrimSpace(values[0])); p {
	case SchemeHTTP, SchemeHTTPS:
		return p, nil
	}
	return "", handshakeErr("forwarded proto must be http or https")
}

// ParseForwardedHost reads the values of a forwarded-host header
// (X-Forwarded-Host by default) from a trusted proxy: exactly one value in
// ParseHostPort's grammar.
func ParseForwardedHost(values []string) (HostPort, error) {
	if len(values) != 1 {
		return HostPort{}, handshakeErr("want one forwarded host, got %d headers", len(values))
	}
	return ParseHostPort(strings.TrimSpace(values[0]))
}
