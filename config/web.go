package config

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// The web listener's modes (docs/protocol.md §4.1.1, §4.1.2) and the startup
// table that refuses every unsafe or incomplete combination:
//
//	mode                  web.host      trust_proxy  required
//	loopback (default)    loopback      ""           nothing; public_host, allowed_origins and
//	                                                 allow_insecure_remote are refused (they would
//	                                                 silently do nothing)
//	direct non-loopback   non-loopback  ""           public_host, allowed_origins,
//	                                                 allow_insecure_remote
//	trusted reverse proxy any           set          public_host, allowed_origins, plus
//	                                                 allow_insecure_remote iff an allowed origin
//	                                                 is http://
//
// In remote mode at least one allowed origin must be on the public host
// (the enrollment page is served from it), and a trusted upstream that is
// not a loopback address cannot be combined with a loopback web.host (it
// could never connect).

// TrustProxyLoopback is the web.trust_proxy value naming a proxy on this
// machine (peer 127.0.0.1 or ::1).
const TrustProxyLoopback = "loopback"

// isLoopbackHost reports whether h is localhost or a loopback IP literal.
func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(h, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}

func ipOrLocalhost(v any) string {
	h := v.(string)
	if strings.EqualFold(h, "localhost") {
		return ""
	}
	a, err := netip.ParseAddr(strings.Trim(h, "[]"))
	if err != nil || a.Zone() != "" {
		return fmt.Sprintf("%q is not an IP address or localhost; bind an address, and name the host browsers use with --public-host", h)
	}
	return ""
}

func publicHost(v any) string {
	h := v.(string)
	if h == "" {
		return ""
	}
	hp, err := protocol.ParseHostPort(h)
	if err != nil {
		return fmt.Sprintf("%q is not a host[:port] such as shard.example.com or shard.example.com:8443: %v", h, err)
	}
	if hp.String() != h {
		return fmt.Sprintf("%q is not in canonical form; write %q", h, hp.String())
	}
	return ""
}

func originList(v any) string {
	for _, o := range v.([]string) {
		if _, err := protocol.ParseOrigin(o); err != nil {
			return fmt.Sprintf("%q is not an exact origin such as https://shard.example.com (scheme, lowercase host, a port only if not the default, no path or trailing slash): %v", o, err)
		}
	}
	return ""
}

func trustProxy(v any) string {
	t := v.(string)
	if t == "" || t == TrustProxyLoopback {
		return ""
	}
	a, err := netip.ParseAddr(t)
	if err != nil || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || a.Unmap().String() != t {
		return fmt.Sprintf("%q is neither %q nor one IP address (no ranges, names or zones)", t, TrustProxyLoopback)
	}
	return ""
}

func headerName(v any) string {
	h := v.(string)
	ok := h != ""
	for i := 0; i < len(h) && ok; i++ {
		c := h[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
	}
	if !ok {
		return fmt.Sprintf("%q is not a header name (letters, digits and dashes)", h)
	}
	switch http.CanonicalHeaderKey(h) {
	case "Host", "Origin", "Cookie", "Authorization", "X-Forwarded-For", "Sec-Websocket-Protocol":
		return fmt.Sprintf("%q carries something else and cannot be used for forwarding", h)
	}
	return ""
}

// validateWeb applies the startup table above to the merged settings. Each
// problem names the flag to set or drop.
func (c *Config) validateWeb() error {
	w := c.Web
	if http.CanonicalHeaderKey(w.ForwardedProtoHeader) == http.CanonicalHeaderKey(w.ForwardedHostHeader) {
		return invalid("web.forwarded_host_header", "", "must differ from web.forwarded_proto_header")
	}
	if !w.Remote() {
		const why = "is only used in remote mode (a non-loopback --web-host or --trust-proxy); in loopback mode the pinned host is %s:<port> and its only origin is http://%s:<port>"
		switch {
		case w.PublicHost != "":
			return invalid("web.public_host", "", fmt.Sprintf("--public-host "+why+"; drop --public-host, or set --trust-proxy or a non-loopback --web-host", w.Host, w.Host))
		case len(w.AllowedOrigins) > 0:
			return invalid("web.allowed_origins", "", fmt.Sprintf("--allowed-origin "+why+"; drop --allowed-origin, or set --trust-proxy or a non-loopback --web-host", w.Host, w.Host))
		case w.AllowInsecureRemote:
			return invalid("web.allow_insecure_remote", "", fmt.Sprintf("--allow-insecure-remote "+why+"; drop it", w.Host, w.Host))
		}
		return nil
	}

	mode := fmt.Sprintf("web.host %s is not loopback", w.Host)
	if w.TrustProxy != "" {
		mode = "--trust-proxy " + w.TrustProxy + " is set"
	}
	if w.TrustProxy != "" && w.TrustProxy != TrustProxyLoopback && isLoopbackHost(w.Host) {
		if a, _ := netip.ParseAddr(w.TrustProxy); !a.Unmap().IsLoopback() {
			return invalid("web.trust_proxy", "", fmt.Sprintf("upstream %s can never reach the loopback web.host %s; set --web-host to an address the proxy can reach, or run the proxy here with --trust-proxy loopback", w.TrustProxy, w.Host))
		}
	}
	if w.PublicHost == "" {
		return invalid("web.public_host", "", fmt.Sprintf("remote mode (%s) needs the pinned public host: set --public-host <host:port>", mode))
	}
	if len(w.AllowedOrigins) == 0 {
		return invalid("web.allowed_origins", "", fmt.Sprintf("remote mode (%s) needs the browser origins to allow: set --allowed-origin <origin> (repeatable)", mode))
	}
	if w.TrustProxy == "" && !w.AllowInsecureRemote {
		return invalid("web.allow_insecure_remote", "", fmt.Sprintf("web.host %s serves plaintext HTTP to the network: set --allow-insecure-remote to accept that session cookies can be read on the way (trusted network, VPN), or bind to loopback behind a TLS reverse proxy with --trust-proxy", w.Host))
	}
	pinned, _ := protocol.ParseHostPort(w.PublicHost) // checked per key
	onPublic := false
	for _, s := range w.AllowedOrigins {
		o, _ := protocol.ParseOrigin(s) // checked per key
		if o.Scheme == protocol.SchemeHTTP && !w.AllowInsecureRemote {
			return invalid("web.allow_insecure_remote", "", fmt.Sprintf("allowed origin %s is plaintext: set --allow-insecure-remote, or allow only https origins", s))
		}
		if o.HostPort.Matches(pinned, o.Scheme) {
			onPublic = true
		}
	}
	if !onPublic {
		scheme := protocol.SchemeHTTPS
		if w.AllowInsecureRemote && w.TrustProxy == "" {
			scheme = protocol.SchemeHTTP
		}
		return invalid("web.allowed_origins", "", fmt.Sprintf("no allowed origin is on the public host %s, which serves the enrollment page: add --allowed-origin %s",
			w.PublicHost, protocol.Origin{Scheme: scheme, HostPort: pinned}.String()))
	}
	return nil
}
