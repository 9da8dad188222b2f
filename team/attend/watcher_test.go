//go:build linux

package attend_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/team/attend"
)

// TestWatcherAnswersAWorkersPermission drives the team's path end to end
// on the real daemon and runtime: a prompt through the Watcher starts the
// lead's turn, which creates a worker (sim: subagent); the worker's write
// asks permission, delegated to the lead's interactive attachment (the
// Watcher), which reports it with the worker's agent_id and answers it
// "Allow once" (a choice_id); the file is written, the run's transitions
// and the lead's usage are reported.
func TestWatcherAnswersAWorkersPermission(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dial(t, d)
	lead, cwd := createAgent(t, c)
	x := startWatch(t, d, lead)
	if s := x.nextSynced(); s.AgentID != lead || s.Reattached {
		t.Fatalf("first sync = %+v", s)
	}

	if err := x.Prompt(ctxFor(t), `sim: subagent writer sim: tool write {"path":"w.txt","content":"from the worker"}`); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	req := x.nextRequest(attend.KindPermission)
	if req.AgentID == "" || req.AgentID == lead || req.Tool != "write" || req.Summary != "w.txt" || req.Resync {
		t.Fatalf("worker's request = %+v", req)
	}
	want := []string{protocol.OptionAllowOnce, protocol.OptionAlwaysAllow, protocol.OptionDeny}
	if !slices.Equal(req.Options, want) || len(req.Choices) == 0 {
		t.Fatalf("options = %q, choices = %+v; want %q and the runtime's choices", req.Options, req.Choices, want)
	}
	if _, err := os.Stat(filepath.Join(cwd, "w.txt")); !os.IsNotExist(err) {
		t.Fatalf("w.txt exists before the answer: %v", err)
	}

	if err := x.AnswerPermission(ctxFor(t), req.RequestID, protocol.OptionAllowOnce, ""); err != nil {
		t.Fatalf("AnswerPermission: %v", err)
	}
	res := x.nextResolved(req.RequestID)
	if !res.Mine || res.Option != protocol.OptionAllowOnce || res.ChoiceID != protocol.DecisionAllow || res.AgentID != req.AgentID || res.Source != "unix" {
		t.Fatalf("resolved = %+v", res)
	}
	x.find("the worker's run completed", func(ev attend.Event) bool {
		r, ok := ev.(attend.RunChanged)
		return ok && r.AgentID == req.AgentID && r.ParentAgentID == lead && r.State == protocol.RunCompleted
	})
	if b, err := os.ReadFile(filepath.Join(cwd, "w.txt")); err != nil || string(b) != "from the worker" {
		t.Fatalf("w.txt = %q, %v", b, err)
	}
	x.find("the lead's usage", func(ev attend.Event) bool {
		u, ok := ev.(attend.Usage)
		return ok && u.AgentID == lead && u.Output > 0
	})
	x.find("the lead streaming", func(ev attend.Event) bool {
		s, ok := ev.(attend.Status)
		return ok && s.Status == protocol.StatusStreaming
	})

	// Answered again: it was this Watcher's answer, so a retry succeeds.
	if err := x.AnswerPermission(ctxFor(t), req.RequestID, protocol.OptionAllowOnce, ""); err != nil {
		t.Fatalf("AnswerPermission again: %v", err)
	}
	// A request never seen is NOT_FOUND.
	err := x.AnswerPermission(ctxFor(t), "perm-nope", protocol.OptionDeny, "")
	if !errors.Is(err, attend.ErrUnknownRequest) || protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("answer to an unknown request: %v", err)
	}
}

// TestWatcherOfAMissingAgentStops: attaching to an agent that does not
// exist ends the Watcher with NOT_FOUND instead of retrying.
func TestWatcherOfAMissingAgentStops(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	x := startWatch(t, d, "agent-01kzzzzzzzzzzzzzzzzzzzzzzz")
	ev := x.next("stop", func(ev attend.Event) bool { _, ok := ev.(attend.Stopped); return ok }).(attend.Stopped)
	if protocol.CodeOf(ev.Err) != protocol.CodeNotFound {
		t.Fatalf("stopped with %v, want NOT_FOUND", ev.Err)
	}
	<-x.Done()
	if err := x.Prompt(ctxFor(t), "hello"); !errors.Is(err, attend.ErrStopped) {
		t.Fatalf("Prompt after the stop: %v", err)
	}
}

// TestWatcherQuestionsAndFirstAnswerWins: a worker's notify is a Notice;
// its select is a question with options, refused an answer it does not
// offer and answered with one it does (on an agent's behalf, which its
// resolution carries in By); its confirm is answered first by
// another client (over the WebSocket), which the Watcher reports with that
// source, and the Watcher's own later answer is an *AnsweredError with
// CONFLICT.
func TestWatcherQuestionsAndFirstAnswerWins(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dial(t, d)
	lead, _ := createAgent(t, c)
	x := startWatch(t, d, lead)
	x.nextSynced()

	var job protocol.SubagentCreateData
	err := c.Call(ctxFor(t), &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate},
		ParentAgentID: lead, Name: "asker",
		Task: "sim: ask notify Starting type=info\nsim: ask select Color red green\nsim: ask confirm Ship it"}, &job)
	if err != nil {
		t.Fatalf("subagent.create: %v", err)
	}
	worker := job.Runs[0].AgentID

	n := x.next("notice", func(ev attend.Event) bool { _, ok := ev.(attend.Notice); return ok }).(attend.Notice)
	if n.AgentID != worker || n.Title != "Starting" || n.NotifyType != "info" {
		t.Fatalf("notice = %+v", n)
	}
	sel := x.nextRequest(attend.KindQuestion)
	if sel.AgentID != worker || sel.UIKind != protocol.UISelect || sel.Title != "Color" || !slices.Equal(sel.Options, []string{"red", "green"}) {
		t.Fatalf("select = %+v", sel)
	}
	if err := x.AnswerQuestion(ctxFor(t), sel.RequestID, "blue"); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("answer blue: %v, want INVALID_REQUEST", err)
	}
	if err := x.AnswerPermission(ctxFor(t), sel.RequestID, protocol.OptionAllowOnce, ""); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("a question answered as a permission: %v, want INVALID_REQUEST", err)
	}
	if err := x.AnswerQuestionBy(ctxFor(t), sel.RequestID, "green", "agent-lead"); err != nil {
		t.Fatalf("answer green: %v", err)
	}
	if res := x.nextResolved(sel.RequestID); !res.Mine || res.Option != "green" || res.Value != "green" || res.By != "agent-lead" {
		t.Fatalf("select resolved = %+v, want green, mine, by agent-lead", res)
	}

	conf := x.nextRequest(attend.KindQuestion)
	if conf.UIKind != protocol.UIConfirm || !slices.Equal(conf.Options, []string{"yes", "no"}) {
		t.Fatalf("confirm = %+v", conf)
	}
	// Another client, a person on the page, answers first.
	ws := dialWebSocket(t, c)
	if err := ws.Call(ctxFor(t), &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: lead}, Role: protocol.RoleInteractive}, nil); err != nil {
		t.Fatalf("attach over the WebSocket: %v", err)
	}
	if err := ws.Call(ctxFor(t), &protocol.UIResponse{Header: protocol.Header{Type: protocol.TypeUIResponse, AgentID: worker},
		RequestID: conf.RequestID, Value: []byte(`"no"`)}, nil); err != nil {
		t.Fatalf("the other client's answer: %v", err)
	}
	res := x.nextResolved(conf.RequestID)
	if res.Mine || res.Source != "websocket" || res.Option != "no" || res.Missed || res.By != "" {
		t.Fatalf("confirm resolved = %+v, want the WebSocket client's no", res)
	}
	err = x.AnswerQuestion(ctxFor(t), conf.RequestID, "yes")
	var ae *attend.AnsweredError
	if !errors.As(err, &ae) || !errors.Is(err, attend.ErrAnswered) || protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("late answer: %v, want an AnsweredError with CONFLICT", err)
	}
	if ae.Resolved.Source != "websocket" || ae.Resolved.Option != "no" {
		t.Fatalf("late answer's error names %+v", ae.Resolved)
	}
	x.find("the asker's run completed", func(ev attend.Event) bool {
		r, ok := ev.(attend.RunChanged)
		return ok && r.AgentID == worker && r.State == protocol.RunCompleted
	})
}

// TestWatcherReattachesAndResyncs: a dropped connection is reported, the
// Watcher attaches again at once and reports the lead's still-open request
// again (Resync), which it then answers; a request answered by another
// client while the Watcher was away is reported Resolved with Missed, and
// answering it is an *AnsweredError.
func TestWatcherReattachesAndResyncs(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dial(t, d)
	lead, cwd := createAgent(t, c)
	x := startWatch(t, d, lead)
	x.nextSynced()

	if err := x.Prompt(ctxFor(t), `sim: tool write {"path":"own.txt","content":"the lead"}`); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	req := x.nextRequest(attend.KindPermission)
	if req.AgentID != lead || req.Summary != "own.txt" {
		t.Fatalf("lead's request = %+v", req)
	}
	x.drop()
	x.next("detach", func(ev attend.Event) bool { _, ok := ev.(attend.Detached); return ok })
	if s := x.nextSynced(); !s.Reattached || s.Status != protocol.StatusWaitingForPermission {
		t.Fatalf("sync after the drop = %+v", s)
	}
	again := x.nextRequest(attend.KindPermission)
	if again.RequestID != req.RequestID || !again.Resync || again.AgentID != lead {
		t.Fatalf("after the reattach = %+v, want %s again", again, req.RequestID)
	}
	if err := x.AnswerPermission(ctxFor(t), req.RequestID, protocol.OptionDeny, "not in this repository"); err != nil {
		t.Fatalf("AnswerPermission: %v", err)
	}
	if res := x.nextResolved(req.RequestID); !res.Mine || res.Option != protocol.OptionDeny {
		t.Fatalf("resolved = %+v", res)
	}
	x.next("the lead idle", func(ev attend.Event) bool {
		s, ok := ev.(attend.Status)
		return ok && s.Status == protocol.StatusIdle
	})
	if _, err := os.Stat(filepath.Join(cwd, "own.txt")); !os.IsNotExist(err) {
		t.Fatalf("own.txt written after a deny: %v", err)
	}

	// Away while another client answers.
	if err := x.Prompt(ctxFor(t), `sim: tool write {"path":"two.txt","content":"x"}`); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	second := x.nextRequest(attend.KindPermission)
	release := x.hold()
	x.drop()
	x.next("detach", func(ev attend.Event) bool { _, ok := ev.(attend.Detached); return ok })
	// While detached, a command waits for the attachment.
	answered := make(chan error, 1)
	actx := ctxFor(t)
	go func() { answered <- x.AnswerPermission(actx, second.RequestID, protocol.OptionAllowOnce, "") }()
	if err := c.Call(ctxFor(t), &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: lead}, Role: protocol.RoleInteractive}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctxFor(t), &protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, AgentID: lead},
		RequestID: second.RequestID, Decision: protocol.DecisionAllow}, nil); err != nil {
		t.Fatal(err)
	}
	if b := waitFile(t, d.Socket(), lead, filepath.Join(cwd, "two.txt")); b != "x" {
		t.Fatalf("two.txt = %q", b)
	}
	release()
	x.nextSynced()
	res := x.nextResolved(second.RequestID)
	if !res.Missed || res.Mine || res.Source != "" {
		t.Fatalf("resolved while away = %+v, want Missed", res)
	}
	var ae *attend.AnsweredError
	if err := <-answered; !errors.As(err, &ae) || !ae.Resolved.Missed || protocol.CodeOf(err) != protocol.CodeConflict {
		t.Fatalf("answer sent after the other client's: %v", err)
	}
}

// waitFile waits until agentID is idle (its turn, which writes path, has
// ended), watching the agent on a connection of its own, and returns what
// path holds.
func waitFile(t *testing.T, socket, agentID, path string) string {
	t.Helper()
	ctx := ctxFor(t)
	c, err := client.Dial(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Request(ctx, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: agentID}, Role: protocol.RoleObserver}); err != nil {
		t.Fatal(err)
	}
	for {
		var idle bool
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("observer connection lost: %v", c.Err())
			}
			switch m := ev.Msg.(type) {
			case *protocol.Sync:
				idle = m.AgentID == agentID && m.Status == protocol.StatusIdle
			case *protocol.Status:
				idle = m.AgentID == agentID && m.Status == protocol.StatusIdle
			}
		case <-ctx.Done():
			t.Fatalf("%s not written: %v", path, ctx.Err())
		}
		if idle {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%s is idle and %s is missing: %v", agentID, path, err)
			}
			return string(b)
		}
	}
}

// dialWebSocket connects a second client over the WebSocket with a ticket
// minted on c.
func dialWebSocket(t *testing.T, c *client.Conn) *client.Conn {
	t.Helper()
	var ticket protocol.WSTicketData
	if err := c.Call(ctxFor(t), &protocol.WSTicket{Header: protocol.Header{Type: protocol.TypeWSTicket}}, &ticket); err != nil {
		t.Fatalf("ws.ticket: %v", err)
	}
	ws, err := client.DialWebSocket(ctxFor(t), "ws"+strings.TrimPrefix(ticket.URL, "http"), ticket.Ticket)
	if err != nil {
		t.Fatalf("WebSocket dial: %v", err)
	}
	drain(t, ws)
	return ws
}

// TestWatcherReportsRequestsOpenAtAttach: a request opened while another
// client was the lead's responder, left open when it went, is in the
// Watcher's first sync and reported (Resync) as any other; the Watcher's
// answer lets the write happen.
func TestWatcherReportsRequestsOpenAtAttach(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dial(t, d)
	lead, cwd := createAgent(t, c)

	ctx := ctxFor(t)
	first, err := client.Dial(ctx, d.Socket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Request(ctx, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: lead}, Role: protocol.RoleInteractive}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Request(ctx, &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: lead},
		Message: `sim: tool write {"path":"early.txt","content":"before the watcher"}`}); err != nil {
		t.Fatal(err)
	}
	var asked string
	for asked == "" {
		select {
		case ev, ok := <-first.Events():
			if !ok {
				t.Fatalf("connection lost: %v", first.Err())
			}
			if p, isPerm := ev.Msg.(*protocol.PermissionRequest); isPerm {
				asked = p.RequestID
			}
		case <-ctx.Done():
			t.Fatal("no permission request")
		}
	}
	first.Close()

	x := startWatch(t, d, lead)
	if s := x.nextSynced(); s.Reattached || s.Status != protocol.StatusWaitingForPermission {
		t.Fatalf("first sync = %+v", s)
	}
	req := x.nextRequest(attend.KindPermission)
	if req.RequestID != asked || !req.Resync || req.AgentID != lead || req.Summary != "early.txt" {
		t.Fatalf("request = %+v, want %s from the sync", req, asked)
	}
	if err := x.AnswerPermission(ctxFor(t), req.RequestID, protocol.OptionAllowOnce, ""); err != nil {
		t.Fatalf("AnswerPermission: %v", err)
	}
	x.next("the lead idle", func(ev attend.Event) bool {
		s, ok := ev.(attend.Status)
		return ok && s.Status == protocol.StatusIdle
	})
	if b, err := os.ReadFile(filepath.Join(cwd, "early.txt")); err != nil || string(b) != "before the watcher" {
		t.Fatalf("early.txt = %q, %v", b, err)
	}
}
