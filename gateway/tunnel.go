package gateway

import (
	"errors"
	"net"
	"time"
)

// ServeTunnel serves the wire protocol to the other nodes of the cluster
// on ln (a cluster/tunnel listener on this node's subject, which only
// members reach: the cluster authenticates its NATS connections). Each
// connection starts with the forward preamble (forwardIdent: the node and
// the identity of the client it forwards for), then is a client
// connection like a unix one, JSONL, under that client's identity: the
// same rules, its transport as the `source` of the answers it gives. It
// gets no daemon-wide broadcasts and never forwards again. It returns at
// once; StopAccepting closes ln.
func (g *Gateway) ServeTunnel(ln net.Listener) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		ln.Close()
		return
	}
	g.tunnelLn = ln
	g.mu.Unlock()
	g.goTracked(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					g.log.Error("tunnel listener stopped", "err", err)
				}
				return
			}
			g.goTracked(func() { g.serveForwarded(c) })
		}
	})
}

// serveForwarded reads a tunnel connection's preamble and starts its
// connection actor.
func (g *Gateway) serveForwarded(c net.Conn) {
	t := newUnixTransport(c)
	t.kind = "tunnel"
	_ = c.SetReadDeadline(time.Now().Add(forwardIdentTimeout))
	line, err := t.rd.Next()
	if err != nil {
		g.log.Warn("tunnel connection without a preamble", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	ident, err := decodeForwardIdent(line)
	if err != nil {
		g.log.Warn("tunnel connection refused", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if !g.reserve() {
		g.refuseUnix(c)
		return
	}
	g.startConn(t, false, credential{kind: credForwarded, principal: ident.Principal}, &ident)
}
