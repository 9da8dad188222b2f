package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/protocol"
)

// transport carries whole records. read is called by one goroutine only;
// write calls are serialized by Conn; close may run concurrently with both
// and must unblock them.
type transport interface {
	// read returns the next record, owned by the caller.
	read() ([]byte, error)
	// write sends one record. fatal reports whether the stream may have been
	// corrupted (part of the record written), so the connection must end.
	write(ctx context.Context, rec []byte) (fatal bool, err error)
	close() error
}

// ---- unix socket (JSONL, docs/protocol.md §2.1) ----

type unixTransport struct {
	nc net.Conn
	r  *protocol.Reader
}

func newUnixTransport(nc net.Conn) *unixTransport {
	return &unixTransport{nc: nc, r: protocol.NewReader(nc, 0)}
}

func (t *unixTransport) read() ([]byte, error) {
	for {
		rec, err := t.r.Next()
		if errors.Is(err, protocol.ErrRecordTooLong) {
			// The oversized record was consumed and the stream is intact;
			// there is nothing useful to deliver, so skip it.
			continue
		}
		if err != nil {
			return nil, err
		}
		if t.r.Owned() {
			return rec, nil // a large record is handed over, not copied
		}
		return append([]byte(nil), rec...), nil
	}
}

func (t *unixTransport) write(ctx context.Context, rec []byte) (bool, error) {
	line := rec
	if len(line) == 0 || line[len(line)-1] != '\n' {
		line = make([]byte, 0, len(rec)+1)
		line = append(append(line, rec...), '\n')
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if ctx.Done() != nil {
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			_ = t.nc.SetWriteDeadline(time.Unix(1, 0)) // in the past: a blocked Write returns
			close(fired)
		})
		defer func() {
			if !stop() {
				<-fired
				_ = t.nc.SetWriteDeadline(time.Time{})
			}
		}()
	}
	n, err := t.nc.Write(line)
	if err != nil {
		if ctx.Err() != nil {
			// The deadline came from ctx. Only a partly written record
			// corrupts the stream.
			return n > 0, ctx.Err()
		}
		return true, err
	}
	return false, nil
}

func (t *unixTransport) close() error { return t.nc.Close() }

// ---- WebSocket (one record per text frame, docs/protocol.md §2.2) ----

type wsTransport struct {
	c *websocket.Conn
}

func (t *wsTransport) read() ([]byte, error) {
	for {
		typ, b, err := t.c.Read(context.Background())
		if err != nil {
			switch websocket.CloseStatus(err) {
			case websocket.StatusNormalClosure, websocket.StatusGoingAway:
				// A clean close by the peer reads like the end of a
				// unix-socket stream.
				return nil, fmt.Errorf("%w (%w)", io.EOF, err)
			}
			return nil, err
		}
		if typ != websocket.MessageText {
			continue // binary frames are unused in v0.1
		}
		return b, nil
	}
}

func (t *wsTransport) write(ctx context.Context, rec []byte) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	// coder/websocket closes the connection when ctx ends mid-write, so any
	// error here is fatal.
	if err := t.c.Write(ctx, websocket.MessageText, rec); err != nil {
		return true, err
	}
	return false, nil
}

func (t *wsTransport) close() error {
	err := t.c.Close(websocket.StatusNormalClosure, "")
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// dialWebSocket performs the upgrade as a non-browser client: it offers the
// shard.v1 subprotocol, carries either a ticket ("ticket.<ticket>" in
// Sec-WebSocket-Protocol) or an API token (Authorization: Bearer), and sends
// no Origin header — the daemon accepts a ticket minted over the unix socket,
// and an API token, only on an upgrade without Origin (docs/protocol.md
// §4.1).
func dialWebSocket(ctx context.Context, rawURL, ticket, token string) (*wsTransport, error) {
	if u, err := url.Parse(rawURL); err != nil || u.Host == "" ||
		(u.Scheme != "ws" && u.Scheme != "wss" && u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("client: websocket url %q: want ws:// or wss:// with a host", rawURL)
	}
	// A private transport, so that a refused upgrade leaves no idle
	// keep-alive connection (and its goroutines) behind in a shared pool.
	ht := http.DefaultTransport.(*http.Transport).Clone()
	defer ht.CloseIdleConnections()
	opts := &websocket.DialOptions{
		HTTPClient:   &http.Client{Transport: ht},
		Subprotocols: []string{protocol.Subprotocol},
	}
	if ticket != "" {
		opts.Subprotocols = append(opts.Subprotocols, protocol.TicketProtocolPrefix+ticket)
	}
	if token != "" {
		opts.HTTPHeader = http.Header{"Authorization": []string{"Bearer " + token}}
	}
	c, resp, err := websocket.Dial(ctx, rawURL, opts)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, fmt.Errorf("client: websocket upgrade %s: HTTP %d: %w", rawURL, resp.StatusCode, err)
		}
		return nil, fmt.Errorf("client: websocket dial %s: %w", rawURL, err)
	}
	c.SetReadLimit(protocol.DefaultMaxRecord)
	return &wsTransport{c: c}, nil
}
