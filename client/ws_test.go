package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/protocol"
)

const (
	goodTicket = "tkt-123"
	goodToken  = "tok-01j0000000000000000000000.secret"
)

// newFakeWSServer serves a fake daemon WebSocket at /ws that requires the
// shard.v1 subprotocol, the ticket subprotocol for goodTicket or the bearer
// goodToken, and no Origin (a non-browser client). It answers every command
// with a success response after one status event, and closes normally on
// daemon.shutdown.
func newFakeWSServer(t *testing.T) (wsURL string) {
	t.Helper()
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var protos []string
		for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
			for p := range strings.SplitSeq(v, ",") {
				protos = append(protos, strings.TrimSpace(p))
			}
		}
		bearer := r.Header.Get("Authorization") == "Bearer "+goodToken
		if !slices.Contains(protos, "shard.v1") || (!slices.Contains(protos, "ticket."+goodTicket) && !bearer) {
			http.Error(w, "bad ticket", http.StatusUnauthorized)
			return
		}
		if len(r.Header.Values("Origin")) != 0 {
			http.Error(w, "a non-browser client sends no Origin", http.StatusBadRequest)
			return
		}
		wg.Add(1)
		defer wg.Done()
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"shard.v1"}})
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		if err := c.Write(ctx, websocket.MessageText, helloRecord); err != nil {
			return
		}
		for {
			_, rec, err := c.Read(ctx)
			if err != nil {
				return
			}
			h, err := protocol.DecodeHeader(rec)
			if err != nil {
				t.Errorf("bad record %s", rec)
				return
			}
			if h.Type == protocol.TypeDaemonShutdown {
				_ = c.Write(ctx, websocket.MessageText, protocol.NewResponse(h.ID, h.Type, nil))
				c.Close(websocket.StatusNormalClosure, "bye")
				return
			}
			_ = c.Write(ctx, websocket.MessageText, protocol.MustMarshal(statusEvent("agent-1", protocol.StatusIdle)))
			_ = c.Write(ctx, websocket.MessageText, protocol.NewResponse(h.ID, h.Type, protocol.AgentListData{Agents: []protocol.AgentInfo{}}))
		}
	}))
	t.Cleanup(func() {
		srv.Close()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
}

func TestWebSocketRequestAndEvents(t *testing.T) {
	url := newFakeWSServer(t)
	ctx := context.Background()
	c, err := DialWebSocket(ctx, url, goodTicket)
	if err != nil {
		t.Fatalf("DialWebSocket: %v", err)
	}
	defer c.Close()
	if c.Hello().ServerVersion != "fake-1" {
		t.Fatalf("hello = %+v", c.Hello())
	}
	var data protocol.AgentListData
	if err := c.Call(ctx, agentList(), &data); err != nil {
		t.Fatal(err)
	}
	if data.Agents == nil {
		t.Fatal("data not decoded")
	}
	if _, ok := nextEvent(t, c).Msg.(*protocol.Status); !ok {
		t.Fatal("status event not delivered")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !errors.Is(c.Err(), ErrClosed) {
		t.Fatalf("Err() = %v", c.Err())
	}
}

func TestWebSocketServerCloseIsEOF(t *testing.T) {
	url := newFakeWSServer(t)
	ctx := context.Background()
	c, err := DialWebSocket(ctx, url, goodTicket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Request(ctx, &protocol.DaemonShutdown{Header: protocol.Header{Type: protocol.TypeDaemonShutdown}}); err != nil {
		t.Fatal(err)
	}
	for range c.Events() {
	}
	if err := c.Err(); !errors.Is(err, io.EOF) || websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("Err() = %v, want io.EOF and a normal close status", err)
	}
}

func TestWebSocketBadTicket(t *testing.T) {
	url := newFakeWSServer(t)
	_, err := DialWebSocket(context.Background(), url, "wrong")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v, want HTTP 401", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("error leaks the ticket: %v", err)
	}
}

func TestWebSocketToken(t *testing.T) {
	url := newFakeWSServer(t)
	ctx := context.Background()
	c, err := DialWebSocketToken(ctx, url, goodToken)
	if err != nil {
		t.Fatalf("DialWebSocketToken: %v", err)
	}
	defer c.Close()
	var data protocol.AgentListData
	if err := c.Call(ctx, agentList(), &data); err != nil {
		t.Fatal(err)
	}
	_, err = DialWebSocketToken(ctx, url, "tok-wrong.secret")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: err = %v, want HTTP 401", err)
	}
	if strings.Contains(err.Error(), "tok-wrong.secret") {
		t.Fatalf("error leaks the token: %v", err)
	}
}

func TestWebSocketBadURL(t *testing.T) {
	for _, bad := range []string{"ftp://x/ws", "ws:///ws", "::"} {
		if _, err := DialWebSocket(context.Background(), bad, goodTicket); err == nil {
			t.Errorf("DialWebSocket(%q) succeeded", bad)
		}
	}
}
