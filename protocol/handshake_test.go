package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func TestParseHostPort(t *testing.T) {
	t.Parallel()
	good := map[string]protocol.HostPort{
		"127.0.0.1:7420":          {Host: "127.0.0.1", Port: 7420},
		"127.0.0.1":               {Host: "127.0.0.1"},
		"[::1]:7420":              {Host: "::1", Port: 7420},
		"[::1]":                   {Host: "::1"},
		"shard.example.com":       {Host: "shard.example.com"},
		"Shard.Example.COM:8443":  {Host: "shard.example.com", Port: 8443},
		"localhost:1":             {Host: "localhost", Port: 1},
		"a-b.c1:65535":            {Host: "a-b.c1", Port: 65535},
		"xn--bcher-kva.example":   {Host: "xn--bcher-kva.example"},
		"[::ffff:127.0.0.1]:7420": {Host: "::ffff:127.0.0.1", Port: 7420}, // valid, and a different host
	}
	for in, want := range good {
		got, err := protocol.ParseHostPort(in)
		if err != nil || got != want {
			t.Errorf("ParseHostPort(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", ":7420", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:07420", "127.0.0.1:65536", "127.0.0.1:+1",
		"127.1", "127.1:7420", "0x7f000001", "2130706433:7420", "0177.0.0.1", "127.000.000.001", "1.2.3.4.5",
		"localhost.", "localhost.:7420", "127.0.0.1.", "example.com.", ".example.com", "a..b",
		"-a.example", "a-.example", "a_b.example", "a b", "user@host", "host/path", "host:1:2",
		"[::1", "[::1]x", "[::1]:", "[0:0:0:0:0:0:0:1]", "[::1%lo]", "[127.0.0.1]", "[::FFFF:7f00:1]",
		"évil.example", strings.Repeat("a", 64) + ".example", strings.Repeat("a.", 130) + "com",
	} {
		if got, err := protocol.ParseHostPort(in); err == nil {
			t.Errorf("ParseHostPort(%q) = %+v, want an error", in, got)
		} else if !errors.Is(err, protocol.ErrHandshake) {
			t.Errorf("ParseHostPort(%q): %v does not wrap ErrHandshake", in, err)
		}
	}
}

func TestHostPortMatches(t *testing.T) {
	t.Parallel()
	pinned := protocol.HostPort{Host: "shard.example.com"}
	tests := []struct {
		host, scheme string
		want         bool
	}{
		{"shard.example.com", "https", true},
		{"shard.example.com:443", "https", true},
		{"shard.example.com:443", "http", false},
		{"shard.example.com:80", "http", true},
		{"shard.example.com:8443", "https", false},
		{"SHARD.example.com", "https", true}, // DNS names are case-insensitive
		{"evil.shard.example.com", "https", false},
		{"shard.example.com.evil", "https", false},
	}
	for _, tt := range tests {
		hp, err := protocol.ParseHostPort(tt.host)
		if err != nil {
			t.Fatal(err)
		}
		if got := hp.Matches(pinned, tt.scheme); got != tt.want {
			t.Errorf("%q over %s matches %v = %v, want %v", tt.host, tt.scheme, pinned, got, tt.want)
		}
	}
}

func TestParseOrigin(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"http://127.0.0.1:7420", "https://shard.example.com", "https://shard.example.com:8443",
		"http://[::1]:7420", "http://localhost", "https://127.0.0.1",
	} {
		o, err := protocol.ParseOrigin(in)
		if err != nil || o.String() != in {
			t.Errorf("ParseOrigin(%q) = %q, %v", in, o.String(), err)
		}
	}
	for _, in := range []string{
		"", "null", "*", "file://", "127.0.0.1:7420", "//127.0.0.1", "ws://127.0.0.1", "HTTP://127.0.0.1",
		"http://127.0.0.1:7420/", "http://127.0.0.1:7420/x", "http://127.0.0.1?x", "http://127.0.0.1#x",
		"http://u@127.0.0.1", "http://127.0.0.1:80", "https://shard.example.com:443", "http://Shard.example",
		"http://127.1", "http://localhost.", "http://[::1]:80", " http://127.0.0.1",
	} {
		if o, err := protocol.ParseOrigin(in); err == nil {
			t.Errorf("ParseOrigin(%q) = %q, want an error", in, o.String())
		}
	}
}

func TestParseWSProtocols(t *testing.T) {
	t.Parallel()
	tests := []struct {
		values []string
		shard  bool
		ticket string
		err    bool
	}{
		{nil, false, "", false},
		{[]string{"shard.v1"}, true, "", false},
		{[]string{"shard.v1, ticket.abc"}, true, "abc", false},
		{[]string{"ticket.abc", "shard.v1"}, true, "abc", false},
		{[]string{"shard.v2, ticket.abc"}, false, "abc", false},
		{[]string{"shard.v1, ticket.a, ticket.b"}, false, "", true},
		{[]string{"ticket.a", "ticket.a"}, false, "", true},
	}
	for _, tt := range tests {
		shard, ticket, err := protocol.ParseWSProtocols(tt.values)
		if shard != tt.shard || ticket != tt.ticket || (err != nil) != tt.err {
			t.Errorf("ParseWSProtocols(%q) = %v, %q, %v", tt.values, shard, ticket, err)
		}
	}
}

func TestParseBearer(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Bearer tok-01.abc_DEF-123": "tok-01.abc_DEF-123",
		"bearer  x==":               "x==",
		"BEARER a/b+c~d":            "a/b+c~d",
	} {
		got, err := protocol.ParseBearer([]string{in})
		if err != nil || got != want {
			t.Errorf("ParseBearer(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range [][]string{
		nil, {"Bearer"}, {"Bearer "}, {"Basic abc"}, {"Bearer a b"}, {"Bearer ==="}, {"Bearer a\tb"},
		{"Bearer a", "Bearer a"}, {"Bearer " + strings.Repeat("a", 513)}, {"Bearer é"},
	} {
		if got, err := protocol.ParseBearer(in); err == nil {
			t.Errorf("ParseBearer(%q) = %q, want an error", in, got)
		}
	}
}

func TestParseForwarded(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"https": "https", "HTTPS": "https", " http ": "http"} {
		if got, err := protocol.ParseForwardedProto([]string{in}); err != nil || got != want {
			t.Errorf("ParseForwardedProto(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range [][]string{nil, {"https, http"}, {"wss"}, {""}, {"https", "https"}} {
		if got, err := protocol.ParseForwardedProto(in); err == nil {
			t.Errorf("ParseForwardedProto(%q) = %q, want an error", in, got)
		}
	}
	if hp, err := protocol.ParseForwardedHost([]string{"shard.example.com:443"}); err != nil || hp.Port != 443 {
		t.Errorf("ParseForwardedHost = %+v, %v", hp, err)
	}
	for _, in := range [][]string{nil, {"a.example, b.example"}, {"a.example", "a.example"}} {
		if hp, err := protocol.ParseForwardedHost(in); err == nil {
			t.Errorf("ParseForwardedHost(%q) = %+v, want an error", in, hp)
		}
	}
}

// FuzzHandshake feeds one header value to every handshake parser. None
// may panic, and each accepted value is in its one canonical spelling: a
// parsed host or origin serializes back to something that parses to the
// same value (an origin, to the input itself).
func FuzzHandshake(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1:7420", "[::1]:7420", "localhost.:7420", "127.1:7420", "[::ffff:127.0.0.1]:7420",
		"0x7f000001:7420", "127.0.0.1.:7420", "shard.example.com", "http://127.0.0.1:7420",
		"https://shard.example.com", "null", "shard.v1, ticket.abc", "Bearer tok-1.abc", "https",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if hp, err := protocol.ParseHostPort(s); err == nil {
			again, err := protocol.ParseHostPort(hp.String())
			if err != nil || again != hp {
				t.Fatalf("ParseHostPort(%q) = %+v, but its String %q parses to %+v, %v", s, hp, hp.String(), again, err)
			}
			if hp.Host != strings.ToLower(hp.Host) || hp.Port < 0 || hp.Port > 65535 {
				t.Fatalf("ParseHostPort(%q) = %+v: not canonical", s, hp)
			}
			if !hp.Matches(hp, "https") {
				t.Fatalf("%+v does not match itself", hp)
			}
		}
		if o, err := protocol.ParseOrigin(s); err == nil && o.String() != s {
			t.Fatalf("ParseOrigin(%q) accepted a non-canonical origin (%q)", s, o.String())
		}
		if _, ticket, err := protocol.ParseWSProtocols([]string{s}); err == nil && ticket != "" &&
			!strings.Contains(s, protocol.TicketProtocolPrefix+ticket) {
			t.Fatalf("ParseWSProtocols(%q) invented ticket %q", s, ticket)
		}
		if cred, err := protocol.ParseBearer([]string{s}); err == nil &&
			(cred == "" || strings.ContainsAny(cred, " \t\r\n") || !strings.HasSuffix(s, cred)) {
			t.Fatalf("ParseBearer(%q) = %q", s, cred)
		}
		if p, err := protocol.ParseForwardedProto([]string{s}); err == nil && p != "http" && p != "https" {
			t.Fatalf("ParseForwardedProto(%q) = %q", s, p)
		}
		if hp, err := protocol.ParseForwardedHost([]string{s}); err == nil && hp.Host == "" {
			t.Fatalf("ParseForwardedHost(%q) = %+v", s, hp)
		}
	})
}
