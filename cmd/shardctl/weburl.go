package main

// shardctl over a node's WebSocket (--url): for a machine that reaches a
// shardd through its web listener rather than its unix socket, with API
// tokens (docs/protocol.md §4.1). In a cluster, attach fails over through
// the other nodes' web_url with their own tokens (docs/protocol.md §13 "A
// client's node dies").

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// tokenEnv holds the API tokens of --url: a token (the --url node's), and
// in a cluster node=token entries for the nodes attach may fail over to,
// comma-separated. Never a flag: a flag shows in the process list.
const tokenEnv = "SHARD_TOKEN"

// webTokens are the tokens of tokenEnv: def, the bare one, for the --url
// node and any node not named; byNode, each named node's.
type webTokens struct {
	def    string
	byNode map[string]string
}

// parseWebTokens reads tokenEnv's value: "tok", or "tok,n1=tok1,n3=tok3"
// (a token has no '=' or ','; a node name neither). At most one bare token.
func parseWebTokens(v string) (webTokens, error) {
	var w webTokens
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		node, tok, named := strings.Cut(e, "=")
		switch {
		case !named && w.def != "":
			return webTokens{}, fmt.Errorf("$%s: more than one token without a node", tokenEnv)
		case !named:
			w.def = e
		case node == "" || tok == "":
			return webTokens{}, fmt.Errorf("$%s: an entry is not node=token", tokenEnv)
		default:
			if w.byNode == nil {
				w.byNode = map[string]string{}
			}
			w.byNode[node] = tok
		}
	}
	return w, nil
}

// forNode is the token to present to node n: its own, else the bare one.
func (w webTokens) forNode(n string) string {
	if t, ok := w.byNode[n]; ok {
		return t
	}
	return w.def
}

// wsEndpoint is the WebSocket endpoint --url names: a ws(s) URL as given,
// an http(s) one (a node's web address, as its web_url) with /ws under it.
func wsEndpoint(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", usageErrorf("--url %q: want http(s)://host:port or ws(s)://host:port/ws", raw)
	}
	switch u.Scheme {
	case "ws", "wss":
		return raw, nil
	case "http", "https":
		return client.WebSocketURL(raw)
	}
	return "", usageErrorf("--url %q: want http(s)://host:port or ws(s)://host:port/ws", raw)
}

// tokens reads tokenEnv for --url.
func (o *globalOptions) tokens() (webTokens, error) {
	w, err := parseWebTokens(os.Getenv(tokenEnv))
	if err != nil {
		return w, usageErrorf("%v", err)
	}
	if w.def == "" {
		return w, usageErrorf("--url needs an API token of that node in $%s (shardctl token create, on its machine)", tokenEnv)
	}
	return w, nil
}

// connectWeb is connect for --url: the WebSocket with the token of
// tokenEnv.
func (o *globalOptions) connectWeb(ctx context.Context) (*client.Conn, error) {
	u, err := wsEndpoint(o.url)
	if err != nil {
		return nil, err
	}
	w, err := o.tokens()
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	conn, err := client.DialWebSocketToken(dctx, u, w.def)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &unreachableError{socket: u, err: err}
	}
	return conn, nil
}

// nodeDialer is how attach reaches another node of its cluster: its socket,
// or with --url its web_url with that node's token of tokenEnv (the bare
// token for a node it names none for, which tokens requires; a node that
// refuses it is passed over like one that is down).
func (o *globalOptions) nodeDialer() client.Dialer {
	if o.url == "" {
		return func(ctx context.Context, n protocol.ClusterNode) (*client.Conn, error) {
			dctx, cancel := context.WithTimeout(ctx, o.timeout)
			defer cancel()
			return client.DialSocket(dctx, n)
		}
	}
	web := client.WebDialer(func(_ context.Context, n protocol.ClusterNode) (client.WebCredential, error) {
		w, err := o.tokens()
		if err != nil {
			return client.WebCredential{}, err
		}
		return client.WebCredential{Token: w.forNode(n.Node)}, nil
	})
	return func(ctx context.Context, n protocol.ClusterNode) (*client.Conn, error) {
		dctx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		return web(dctx, n)
	}
}
