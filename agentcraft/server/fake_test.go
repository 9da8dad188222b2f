package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shard-dev/shard/agentcraft/wire"
	"github.com/shard-dev/shard/protocol"
)

// bound is how long a test waits for something that should come at once;
// it only bounds a failure.
const bound = 20 * time.Second

// fakeDaemon is a small daemon speaking Shard's wire protocol as JSONL on
// a real unix socket: it answers the commands the server sends from the
// records the test gives it, in docs/protocol.md §10.4's shapes, records
// every command, and emits the events the test asks for to every
// connection.
type fakeDaemon struct {
	t    *testing.T
	path string
	ln   net.Listener
	wg   sync.WaitGroup

	// cmds receives every command received, decoded.
	cmds chan protocol.Command

	// mu protects the following.
	mu        sync.Mutex
	conns     []net.Conn
	agents    []protocol.AgentInfo
	goals     []protocol.TeamGoal
	tasks     []protocol.TeamTask
	decisions []protocol.TeamDecision
	memory    []protocol.TeamMemoryEntry
	feed      []protocol.TeamFeedItem // oldest first
	diff      protocol.WorkspaceDiffData
	// answer, when set, answers a command instead of the defaults: data,
	// or an error.
	answer func(cmd protocol.Command) (any, error)
}

// shortDir returns a temp dir short enough for a unix socket path.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "acs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func newFakeDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	path := filepath.Join(shortDir(t), "d.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDaemon{t: t, path: path, ln: ln, cmds: make(chan protocol.Command, 256)}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fakeDaemon) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.mu.Unlock()
		f.write(c, protocol.MustMarshal(protocol.Hello{Header: protocol.Header{Type: protocol.TypeHello},
			ProtocolVersion: protocol.Version, ServerVersion: "0.1.0", Capabilities: []string{}}))
		f.wg.Add(1)
		go f.serve(c)
	}
}

func (f *fakeDaemon) write(c net.Conn, rec []byte) {
	_, _ = c.Write(append(rec, '\n'))
}

func (f *fakeDaemon) serve(c net.Conn) {
	defer f.wg.Done()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		cmd, h, err := protocol.DecodeCommand(sc.Bytes())
		if err != nil {
			f.write(c, protocol.NewErrorResponse(h.ID, h.Type, err))
			continue
		}
		data, err := f.reply(cmd, h)
		f.cmds <- cmd
		if err != nil {
			f.write(c, protocol.NewErrorResponse(h.ID, h.Type, err))
		} else {
			f.write(c, protocol.NewResponse(h.ID, h.Type, data))
		}
	}
}

// reply answers one command from the records.
func (f *fakeDaemon) reply(cmd protocol.Command, h protocol.Header) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.answer != nil {
		if data, err := f.answer(cmd); data != nil || err != nil {
			return data, err
		}
	}
	switch c := cmd.(type) {
	case *protocol.AgentList:
		return protocol.AgentListData{Agents: slices.Clone(f.agents)}, nil
	case *protocol.TeamGoalList:
		return protocol.TeamGoalListData{Goals: slices.Clone(f.goals)}, nil
	case *protocol.TeamGoalShow:
		out := protocol.TeamGoalShowData{Tasks: []protocol.TeamTask{}, Decisions: []protocol.TeamDecision{}}
		for _, g := range f.goals {
			if g.GoalID == c.GoalID {
				out.Goal = g
			}
		}
		for _, t := range f.tasks {
			if t.GoalID == c.GoalID {
				out.Tasks = append(out.Tasks, t)
			}
		}
		for _, d := range f.decisions {
			if d.GoalID == c.GoalID {
				out.Decisions = append(out.Decisions, d)
			}
		}
		return out, nil
	case *protocol.TeamMemoryList:
		return protocol.TeamMemoryListData{Entries: slices.Clone(f.memory)}, nil
	case *protocol.TeamFeed:
		items := slices.Clone(f.feed)
		slices.Reverse(items)
		return protocol.TeamFeedData{Items: items}, nil
	case *protocol.TeamGoalSubmit:
		return protocol.TeamGoalData{Goal: protocol.TeamGoal{GoalID: "g2", Text: c.Text, Cwd: c.Cwd, Status: protocol.GoalPlanning}}, nil
	case *protocol.WorkspaceDiff:
		d := f.diff
		d.WorkspaceID = c.WorkspaceID
		return d, nil
	}
	return map[string]any{}, nil
}

// emit sends an event to every connection.
func (f *fakeDaemon) emit(ev any) {
	rec := protocol.MustMarshal(ev)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		f.write(c, rec)
	}
}

// nextCmd returns the next command of type typ the daemon received,
// skipping others.
func (f *fakeDaemon) nextCmd(t *testing.T, typ string) protocol.Command {
	t.Helper()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		select {
		case c := <-f.cmds:
			if c.Head().Type == typ {
				return c
			}
		case <-timer.C:
			t.Fatalf("the daemon received no %s", typ)
			return nil
		}
	}
}

// startServer starts a Server against f on a free loopback port.
func startServer(t *testing.T, f *fakeDaemon, mod func(*Config)) *Server {
	t.Helper()
	cfg := Config{Listen: "127.0.0.1:0", Socket: f.path, ReposFile: filepath.Join(t.TempDir(), "repos.json")}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// wsClient is a plain WebSocket client of the dialect: JSON in text
// frames, no Origin header.
type wsClient struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialWS(t *testing.T, addr string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &wsClient{t: t, ws: ws}
}

// sendRaw sends one text frame.
func (c *wsClient) sendRaw(s string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

// send sends one JSON object.
func (c *wsClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

// frame is one frame the server sent: its raw bytes and type.
type frame struct {
	raw  []byte
	typ  string
	body map[string]any
}

// read reads the next frame.
func (c *wsClient) read() frame {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	typ, b, err := c.ws.Read(ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if typ != websocket.MessageText {
		c.t.Fatalf("a %v frame; the dialect sends text frames", typ)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		c.t.Fatalf("frame is not one JSON object: %v: %s", err, b)
	}
	if _, err := wire.DecodeServer(b); err != nil {
		c.t.Fatalf("the server sent a frame the dialect's decoder refuses: %v\n%s", err, b)
	}
	t, _ := body["type"].(string)
	return frame{raw: b, typ: t, body: body}
}

// next reads frames until one of type typ matches ok (nil: any).
func (c *wsClient) next(typ string, ok func(frame) bool) frame {
	c.t.Helper()
	for {
		f := c.read()
		if f.typ == typ && (ok == nil || ok(f)) {
			return f
		}
	}
}

// hello sends hello and returns the snapshot.
func (c *wsClient) hello() wire.Snapshot {
	c.t.Helper()
	c.sendRaw(`{"v":1,"type":"hello","modVersion":"0.1.0","protocol":1,"client":"cli"}`)
	f := c.next("snapshot", nil)
	m, err := wire.DecodeServer(f.raw)
	if err != nil {
		c.t.Fatal(err)
	}
	return m.(wire.Snapshot)
}
