package daemon_test

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// rawConn is a unix-socket client that speaks raw lines, for malformed input.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	rd *bufio.Reader
}

func (h *harness) raw() *rawConn {
	h.t.Helper()
	c, err := net.Dial("unix", h.cfg.SocketPath())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return &rawConn{t: h.t, c: c, rd: bufio.NewReader(c)}
}

func (r *rawConn) send(line string) {
	r.t.Helper()
	if _, err := r.c.Write([]byte(line + "\n")); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) next() map[string]any {
	r.t.Helper()
	line, err := r.rd.ReadBytes('\n')
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		r.t.Fatalf("daemon sent invalid JSON %q: %v", line, err)
	}
	return m
}

func TestHelloFirstAndBadInputKeepsConnection(t *testing.T) {
	h := start(t, nil)
	r := h.raw()
	hello := r.next()
	if hello["type"] != "hello" || hello["protocol_version"] != protocol.Version {
		t.Fatalf("first message = %v, want hello", hello)
	}
	cases := []struct {
		line, wantID, wantInMsg string
	}{
		{`{not json`, "", "malformed JSON"},
		{`[1,2]`, "", "JSON object"},
		{`{"id":"a1"}`, "a1", `"type"`},
		{`{"id":"a2","type":7}`, "a2", `"type"`},
		{`{"id":"a3","type":"no.such.thing"}`, "a3", `unknown type "no.such.thing"`},
		{`{"id":"a4","type":"prompt","agent_id":"x","message":5}`, "a4", `field "message"`},
		{`{"id":"a5","type":"agent.attach"}`, "a5", `field "agent_id"`},
		{`{"id":"a6","type":"agent.kill","agent_id":"x","force":"yes"}`, "a6", `field "force"`},
	}
	for _, tc := range cases {
		r.send(tc.line)
		resp := r.next()
		if resp["type"] != "response" || resp["success"] != false {
			t.Fatalf("%s: got %v, want failed response", tc.line, resp)
		}
		if id, _ := resp["id"].(string); id != tc.wantID {
			t.Errorf("%s: id = %q, want %q", tc.line, id, tc.wantID)
		}
		e := resp["error"].(map[string]any)
		if e["code"] != string(protocol.CodeInvalidRequest) || !strings.Contains(e["message"].(string), tc.wantInMsg) {
			t.Errorf("%s: error = %v, want INVALID_REQUEST mentioning %q", tc.line, e, tc.wantInMsg)
		}
	}
	// Still open and serving.
	r.send(`{"id":"ok","type":"agent.list"}`)
	if resp := r.next(); resp["id"] != "ok" || resp["success"] != true {
		t.Fatalf("agent.list after bad input = %v", resp)
	}
}

func TestCreateListStatusAndCanonicalCwd(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	watcher := h.dial()

	real := shortTemp(t)
	link := filepath.Join(shortTemp(t), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	id := h.create(c, func(a *protocol.AgentCreate) { a.Cwd = link; a.Name = "builder" })

	spawned := waitFor(t, watcher, isAgentEvent(protocol.TypeAgentSpawned, id)).Msg.(*protocol.AgentSpawned)
	if spawned.Info.Cwd != real {
		t.Errorf("agent_spawned cwd = %q, want canonical %q", spawned.Info.Cwd, real)
	}

	var list protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Agents) != 1 || list.Agents[0].AgentID != id || list.Agents[0].Name != "builder" || list.Agents[0].Cwd != real {
		t.Fatalf("agent.list = %+v", list.Agents)
	}
	if list.Agents[0].RuntimeState != protocol.RuntimeRunning {
		t.Errorf("runtime_state after create = %q, want running", list.Agents[0].RuntimeState)
	}

	var st protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}}, &st); err != nil || len(st.Agents) != 1 {
		t.Fatalf("agent.status = %+v, %v", st, err)
	}
	_, err := c.Request(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: "agent-nope"}})
	if protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Errorf("agent.status unknown = %v, want NOT_FOUND", err)
	}

	for _, bad := range []string{"relative/dir", filepath.Join(real, "missing")} {
		_, err := c.Request(ctx(t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: bad})
		if protocol.CodeOf(err) != protocol.CodeInvalidRequest {
			t.Errorf("create cwd %q = %v, want INVALID_REQUEST", bad, err)
		}
	}
	// Nothing was created by the failed requests.
	if err := c.Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil || len(list.Agents) != 1 {
		t.Fatalf("after bad creates: %+v, %v", list.Agents, err)
	}
}

func TestPerAgentRoutingNeedsAttachment(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	id := h.create(c, nil)
	cases := []struct {
		agentID string
		want    protocol.ErrorCode
	}{
		{"", protocol.CodeNotAttached},
		{"agent-unknown", protocol.CodeNotFound},
		{id, protocol.CodeNotAttached},
	}
	for _, tc := range cases {
		_, err := c.Request(ctx(t), &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: tc.agentID}, Message: "hi"})
		if protocol.CodeOf(err) != tc.want {
			t.Errorf("prompt to %q: %v, want %s", tc.agentID, err, tc.want)
		}
	}
}

// turnText concatenates the text deltas of events.
func turnText(evs []client.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if d, ok := e.Msg.(*protocol.MessageDelta); ok && d.Kind == protocol.DeltaText {
			b.WriteString(d.TextDelta)
		}
	}
	return b.String()
}

func TestTwoClientsSeeTheSameStream(t *testing.T) {
	h := start(t, nil)
	c1, c2 := h.dial(), h.dial()
	id := h.create(c1, nil)
	attach(t, c1, id, "")
	attach(t, c2, id, "")

	// Both clients use the same command id: ids are rewritten per agent.
	r1, err := c1.Request(ctx(t), &protocol.Prompt{Header: protocol.Header{ID: "same", Type: protocol.TypePrompt, AgentID: id}, Message: "sim: say alpha beta gamma"})
	if err != nil || r1.ID != "same" || r1.AgentID != id {
		t.Fatalf("prompt response = %+v, %v", r1, err)
	}
	ev1 := collectUntil(t, c1, isType(protocol.TypeTurnEnd, id))
	ev2 := collectUntil(t, c2, isType(protocol.TypeTurnEnd, id))
	if got := turnText(ev1); got != "alpha beta gamma" {
		t.Errorf("client 1 text = %q", got)
	}
	filter := func(evs []client.Event) []string {
		var out []string
		for _, e := range evs {
			if e.Msg.Head().AgentID == id {
				out = append(out, string(e.Raw))
			}
		}
		return out
	}
	a, b := filter(ev1), filter(ev2)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("streams differ:\n1: %v\n2: %v", a, b)
	}
	for _, e := range ev2 {
		if e.Msg.Head().Type == protocol.TypeResponse {
			t.Fatalf("client 2 saw client 1's response: %s", e.Raw)
		}
	}
	// The second client may reuse the id.
	r2, err := c2.Request(ctx(t), &protocol.Prompt{Header: protocol.Header{ID: "same", Type: protocol.TypePrompt, AgentID: id}, Message: "again"})
	if err != nil || r2.ID != "same" {
		t.Fatalf("second prompt = %+v, %v", r2, err)
	}
	collectUntil(t, c1, isType(protocol.TypeTurnEnd, id))
	for _, e := range collectUntil(t, c2, isType(protocol.TypeTurnEnd, id)) {
		if e.Msg.Head().Type == protocol.TypeResponse {
			t.Fatalf("response leaked to events: %s", e.Raw)
		}
	}
}

func TestActivityOverviewReachesEveryConnectionSanitized(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	bystander := h.dial() // never attaches
	id := h.create(c, nil)
	attach(t, c, id, "")
	const secret = "PROMPT-TEXT-7f3a"
	prompt(t, c, id, "sim: think pondering "+secret+"\nsim: tool read {\"path\":\"/etc/hostname\"}\nsim: say "+secret)
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))

	phases := map[string]bool{}
	var tool string
	waitFor(t, bystander, func(e client.Event) bool {
		raw := e.Raw
		if u, ok := e.Msg.(*protocol.AgentUpdated); ok {
			// The automatic title quotes the first prompt's first line
			// (docs/protocol.md §10.1): the one member a broadcast may
			// carry it in. Nothing else of the event may.
			u.Info.Title = ""
			raw = protocol.MustMarshal(u)
		}
		if strings.Contains(string(raw), secret) || strings.Contains(string(raw), "/etc/hostname") {
			t.Fatalf("a broadcast carried prompt text or a path: %s", e.Raw)
		}
		if a, ok := e.Msg.(*protocol.AgentActivity); ok && a.AgentID == id {
			if a.Timestamp <= 0 {
				t.Fatalf("agent_activity without a timestamp: %s", e.Raw)
			}
			phases[a.Phase] = true
			if a.ToolName != "" {
				tool = a.ToolName
			}
			return a.Phase == protocol.PhaseIdle && phases[protocol.PhaseTool]
		}
		if e.Msg.Head().AgentID == id && e.Msg.Head().Type != protocol.TypeAgentActivity &&
			e.Msg.Head().Type != protocol.TypeAgentStatusChanged && e.Msg.Head().Type != protocol.TypeAgentSpawned &&
			e.Msg.Head().Type != protocol.TypeAgentUpdated {
			t.Fatalf("unattached connection received a per-agent event: %s", e.Raw)
		}
		return false
	})
	for _, p := range []string{protocol.PhaseThinking, protocol.PhaseTool, protocol.PhaseStreaming} {
		if !phases[p] {
			t.Errorf("agent_activity never showed phase %q (saw %v)", p, phases)
		}
	}
	if tool != "read" {
		t.Errorf("agent_activity tool_name = %q, want read", tool)
	}
}

func TestDaemonCheck(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	var data protocol.DaemonCheckData
	if err := c.Call(ctx(t), &protocol.DaemonCheck{Header: protocol.Header{Type: protocol.TypeDaemonCheck}}, &data); err != nil {
		t.Fatal(err)
	}
	if !data.StoreOK || data.SchemaVersion != store.SchemaVersion {
		t.Fatalf("daemon.check = %+v", data)
	}
}

func TestModeAndModelSelectionSurviveRuntimeRestart(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	if _, err := c.Request(ctx(t), &protocol.SetMode{Header: protocol.Header{Type: protocol.TypeSetMode, AgentID: id}, Mode: "plan"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Request(ctx(t), &protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, AgentID: id}, Model: "sim-think"}); err != nil {
		t.Fatal(err)
	}
	ev := waitFor(t, c, isType(protocol.TypeModelChanged, id)).Msg.(*protocol.ModelChanged)
	if ev.Active.Model != "sim-think" {
		t.Fatalf("model_changed = %+v", ev)
	}
	if _, err := c.Request(ctx(t), &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: id}, Force: true}); err != nil {
		t.Fatal(err)
	}
	prompt(t, c, id, "hello again") // restores the runtime
	sync := waitFor(t, c, isType(protocol.TypeSync, id)).Msg.(*protocol.Sync)
	if sync.Mode != "plan" {
		t.Errorf("mode after restart = %q, want plan", sync.Mode)
	}
	var st protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Agents[0].Model != "sim-think" || st.Agents[0].Mode != "plan" {
		t.Errorf("agent info after restart = %+v", st.Agents[0])
	}
	var models struct {
		Active protocol.ModelDescriptor `json:"active"`
	}
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	if err := c.Call(ctx(t), &protocol.ListModels{Header: protocol.Header{Type: protocol.TypeListModels, AgentID: id}}, &models); err != nil {
		t.Fatal(err)
	}
	if models.Active.Model != "sim-think" {
		t.Errorf("active model after restart = %+v", models.Active)
	}
}

func TestConfiguredPricesGiveUsageCost(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Provider.Prices = "sim=1000000/2000000" }) // $1 and $2 per token (prices are per million)
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	prompt(t, c, id, "sim: say priced")
	end := waitFor(t, c, isType(protocol.TypeTurnEnd, id)).Msg.(*protocol.TurnEnd)
	if end.Usage == nil || end.Usage.Cost != float64(end.Usage.Input)+2*float64(end.Usage.Output) || end.Usage.Cost == 0 {
		t.Fatalf("turn usage = %+v", end.Usage)
	}
}

// TestDaemonStatusDescribesTheDaemon: daemon.status (a Shard extension,
// docs/protocol.md §10.1) says which daemon answers, since when, where its
// page is, and counts its agents by runtime state and status and its
// connections, as `shardctl status` shows them.
func TestDaemonStatusDescribesTheDaemon(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	before := time.Now().UnixMilli()
	h.create(c, nil)
	stopped := h.create(c, nil)
	if _, err := c.Request(ctx(t), &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: stopped}}); err != nil {
		t.Fatalf("agent.kill: %v", err)
	}
	var st protocol.DaemonStatusData
	if err := c.Call(ctx(t), &protocol.DaemonStatus{Header: protocol.Header{Type: protocol.TypeDaemonStatus}}, &st); err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.Version == "" || st.ProtocolVersion != protocol.Version || st.Home == "" {
		t.Errorf("identity = pid %d version %q protocol %q home %q", st.PID, st.Version, st.ProtocolVersion, st.Home)
	}
	if st.StartedAt <= 0 || st.StartedAt > before || st.UptimeMs < 0 || st.UptimeMs > time.Now().UnixMilli()-st.StartedAt+1 {
		t.Errorf("started_at %d, uptime_ms %d (created the first agent at %d)", st.StartedAt, st.UptimeMs, before)
	}
	if !strings.HasPrefix(st.WebURL, "http://127.0.0.1:") {
		t.Errorf("web_url = %q, want the loopback page", st.WebURL)
	}
	if st.AgentsByRuntimeState[protocol.RuntimeRunning] != 1 || st.AgentsByRuntimeState[protocol.RuntimeStopped] != 1 {
		t.Errorf("agents_by_runtime_state = %v, want one running and one stopped", st.AgentsByRuntimeState)
	}
	if n := st.AgentsByStatus[protocol.StatusIdle]; n != 2 {
		t.Errorf("agents_by_status = %v, want two idle", st.AgentsByStatus)
	}
	if st.Connections < 1 || st.StoreBytes <= 0 {
		t.Errorf("connections %d, store_bytes %d", st.Connections, st.StoreBytes)
	}
}
