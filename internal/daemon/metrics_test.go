package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/protocol"
)

// families is one scrape of /metrics, parsed.
type families map[string]*dto.MetricFamily

// scrape GETs /metrics on the daemon's web listener with no credential at
// all (no ticket, no header) and parses the text exposition.
func (h *harness) scrape() families {
	h.t.Helper()
	resp, err := http.Get(h.d.WebURL() + "/metrics")
	if err != nil {
		h.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET /metrics = %d: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		h.t.Fatalf("GET /metrics Content-Type = %q, want the text exposition", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		h.t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// value returns the sample of name whose labels include the given
// name/value pairs: a counter's or gauge's value, a histogram's count.
// Several matching series are summed; none is 0.
func (f families) value(name string, labels ...string) float64 {
	fam := f[name]
	if fam == nil {
		return 0
	}
	sum := 0.0
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// series renders every sample of name for failure messages.
func (f families) series(name string) string {
	fam := f[name]
	if fam == nil {
		return name + ": absent"
	}
	var out []string
	for _, m := range fam.GetMetric() {
		var ls []string
		for _, lp := range m.GetLabel() {
			ls = append(ls, lp.GetName()+"="+lp.GetValue())
		}
		v := 0.0
		switch {
		case m.Counter != nil:
			v = m.Counter.GetValue()
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Histogram != nil:
			v = float64(m.Histogram.GetSampleCount())
		}
		out = append(out, fmt.Sprintf("{%s} %g", strings.Join(ls, ","), v))
	}
	sort.Strings(out)
	return name + " " + strings.Join(out, " ")
}

// want is one expected sample: name, labels, value.
type want struct {
	name   string
	labels []string
	value  float64
}

func m(name string, value float64, labels ...string) want {
	return want{name: name, labels: labels, value: value}
}

// expectMetrics scrapes until every expectation holds (gauges follow the
// actors' messages), failing with the last scrape after 10 s.
func (h *harness) expectMetrics(wants ...want) families {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f := h.scrape()
		var bad []string
		for _, w := range wants {
			if got := f.value(w.name, w.labels...); got != w.value {
				bad = append(bad, fmt.Sprintf("%s%v = %g, want %g\n  %s", w.name, w.labels, got, w.value, f.series(w.name)))
			}
		}
		if len(bad) == 0 {
			return f
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("metrics never matched:\n%s", strings.Join(bad, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMetricsEndpointIsServedWithoutTicketAndWSStillNeedsOne(t *testing.T) {
	h := start(t, nil)
	f := h.expectMetrics(m("shard_build_info", 1, "version", "test", "protocol_version", protocol.Version))
	// Every state series exists (at zero) before anything happened.
	for _, name := range []string{"shard_agents_by_runtime_state", "shard_runs_by_state", "shard_runtime_exits_total",
		"shard_connections", "shard_run_stop_stage_total", "go_goroutines", "process_start_time_seconds"} {
		if f[name] == nil {
			t.Errorf("%s missing from /metrics", name)
		}
	}
	if n := len(f["shard_runs_by_state"].GetMetric()); n != 8 {
		t.Errorf("shard_runs_by_state has %d series, want one per run state (8)", n)
	}
	resp, err := http.Get(h.d.WebURL() + "/ws")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /ws without a ticket = %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, h.d.WebURL()+"/metrics", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /metrics = %d, want 405", resp.StatusCode)
	}
}

// isRelayed reports whether an event reached the client through the
// agent's fan-out to attachments (as opposed to a broadcast to every
// connection, the attach handshake's sync, or a response).
func isRelayed(e client.Event, agentID string) bool {
	switch e.Msg.Head().Type {
	case protocol.TypeSync, protocol.TypeResponse, protocol.TypeAgentStatusChanged, protocol.TypeAgentActivity,
		protocol.TypeAgentExited, protocol.TypeAgentSpawned, protocol.TypeSubagentRunChanged, protocol.TypeAgentUpdated:
		return false
	}
	var p struct {
		AgentID string `json:"agent_id"`
	}
	_ = json.Unmarshal(e.Raw, &p)
	return p.AgentID == agentID
}

func TestMetricsConnectionsAgentsAttachmentsAndRuntimes(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	h.expectMetrics(m("shard_connections", 1, "transport", "unix"), m("shard_connections", 0, "transport", "websocket"))

	a1 := h.create(c, nil)
	a2 := h.create(c, nil)
	h.expectMetrics(
		m("shard_runtime_starts_total", 2),
		m("shard_agents_by_runtime_state", 2, "runtime_state", "running"),
		m("shard_agents_by_runtime_state", 0, "runtime_state", "stopped"),
		m("shard_attachments", 0),
		m("shard_events_relayed_total", 0),
	)

	// One attachment, one turn, then detach: every event the client got
	// through the agent's fan-out is one relayed event, and none can follow
	// the detach response.
	attach(t, c, a1, "")
	h.expectMetrics(m("shard_attachments", 1))
	prompt(t, c, a1, "sim: say hello metrics")
	relayed := 0
	for _, e := range collectUntil(t, c, isAgentEvent(protocol.TypeTurnEnd, a1)) {
		if isRelayed(e, a1) {
			relayed++
		}
	}
	if err := c.Call(ctx(t), &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: a1}}, nil); err != nil {
		t.Fatalf("agent.detach: %v", err)
	}
	for drained := false; !drained; {
		select {
		case e := <-c.Events():
			if isRelayed(e, a1) {
				relayed++
			}
		default:
			drained = true
		}
	}
	if relayed < 3 {
		t.Fatalf("only %d relayed events seen for a turn", relayed)
	}
	h.expectMetrics(m("shard_attachments", 0), m("shard_events_relayed_total", float64(relayed)))

	// A second connection over WebSocket, with a ticket minted here.
	var ticket protocol.WSTicketData
	if err := c.Call(ctx(t), &protocol.WSTicket{Header: protocol.Header{Type: protocol.TypeWSTicket}}, &ticket); err != nil {
		t.Fatalf("ws.ticket: %v", err)
	}
	ws, err := client.DialWebSocket(ctx(t), "ws"+strings.TrimPrefix(ticket.URL, "http"), ticket.Ticket)
	if err != nil {
		t.Fatalf("websocket dial: %v", err)
	}
	h.expectMetrics(m("shard_connections", 1, "transport", "websocket"), m("shard_connections", 1, "transport", "unix"))
	ws.Close()
	h.expectMetrics(m("shard_connections", 0, "transport", "websocket"))

	// A requested stop, then a crash.
	var term protocol.AgentTerminateData
	if err := c.Call(ctx(t), &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: a2}}, &term); err != nil {
		t.Fatalf("agent.terminate: %v", err)
	}
	h.expectMetrics(
		m("shard_runtime_exits_total", 1, "reason", "requested"),
		m("shard_agents_by_runtime_state", 1, "runtime_state", "stopped"),
		m("shard_agents_by_runtime_state", 1, "runtime_state", "running"),
	)
	pids := runtimePIDs(t, a1)
	if len(pids) == 0 {
		t.Fatal("no runtime process for the first agent")
	}
	for _, pid := range pids {
		killPID(pid)
	}
	h.expectMetrics(
		m("shard_runtime_exits_total", 1, "reason", "crash"),
		m("shard_runtime_exits_total", 1, "reason", "requested"),
		m("shard_runtime_exits_total", 0, "reason", "start_failed"),
		m("shard_runtime_starts_total", 2),
		m("shard_runtime_reaps_total", 0),
		m("shard_agents_by_runtime_state", 1, "runtime_state", "failed"),
		m("shard_agents_by_runtime_state", 1, "runtime_state", "stopped"),
		m("shard_agents_by_runtime_state", 0, "runtime_state", "running"),
		m("shard_slow_consumers_dropped_total", 0, "transport", "unix"),
	)
	// Every agent.create committed: the store timed its transactions.
	if f := h.scrape(); f.value("shard_bbolt_commit_seconds") < 2 {
		t.Fatalf("bbolt commits observed: %s", f.series("shard_bbolt_commit_seconds"))
	}
}

func TestMetricsIdleReapAndStartFailure(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Runtime.IdleTimeout = 200 * time.Millisecond })
	c := h.dial()
	h.create(c, nil)
	h.expectMetrics(
		m("shard_runtime_reaps_total", 1),
		m("shard_runtime_exits_total", 1, "reason", "requested"),
		m("shard_agents_by_runtime_state", 1, "runtime_state", "stopped"),
	)

	// A runtime command that exits at once never becomes ready.
	cfg := newConfig(t)
	d, err := daemon.New(cfg, daemon.Options{Version: "test", RuntimePath: "/bin/false",
		Environ: os.Environ(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(true) })
	bad := &harness{t: t, cfg: cfg, d: d}
	bc := bad.dial()
	_, err = bc.Request(ctx(t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)})
	if protocol.CodeOf(err) != protocol.CodeRuntimeStartFailed {
		t.Fatalf("agent.create with a failing runtime: %v, want RUNTIME_START_FAILED", err)
	}
	bad.expectMetrics(
		m("shard_runtime_starts_total", 1),
		m("shard_runtime_exits_total", 1, "reason", "start_failed"),
		m("shard_runtime_exits_total", 0, "reason", "crash"),
		m("shard_agents_by_runtime_state", 1, "runtime_state", "failed"),
	)
}

func TestMetricsSlowConsumerIsCounted(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Gateway.OutboundMaxMessages = 64 })
	ctl := h.dial()
	id := h.create(ctl, nil)

	// A raw unix client attaches, prompts a flood and never reads again.
	conn, err := net.Dial("unix", h.cfg.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte(`{"type":"agent.attach","id":"a","agent_id":"` + id + `"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(line), `"type":"sync"`) {
			break
		}
	}
	h.expectMetrics(m("shard_connections", 2, "transport", "unix"), m("shard_attachments", 1))
	msg := strconv.Quote("sim: flood 4000 1024")
	if _, err := conn.Write([]byte(`{"type":"prompt","id":"p","agent_id":"` + id + `","message":` + msg + `}` + "\n")); err != nil {
		t.Fatal(err)
	}
	h.expectMetrics(
		m("shard_slow_consumers_dropped_total", 1, "transport", "unix"),
		m("shard_connections", 1, "transport", "unix"),
		m("shard_attachments", 0),
	)
}

// runStates are the run states with their expected count.
func runStates(counts map[protocol.RunState]float64) []want {
	var out []want
	for _, s := range []protocol.RunState{protocol.RunQueued, protocol.RunStarting, protocol.RunActive, protocol.RunCompleted,
		protocol.RunFailed, protocol.RunTimedOut, protocol.RunCancelled, protocol.RunInterrupted} {
		out = append(out, m("shard_runs_by_state", counts[s], "state", string(s)))
	}
	return out
}

// waitRunState waits for a subagent_run_changed event of run to state.
func waitRunState(t *testing.T, c *client.Conn, runID string, state protocol.RunState) {
	t.Helper()
	waitFor(t, c, func(e client.Event) bool {
		ev, ok := e.Msg.(*protocol.SubagentRunChanged)
		return ok && ev.RunID == runID && ev.State == state
	})
}

func TestMetricsSubagentJobs(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")

	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Strategy: protocol.StrategyParallel,
		Tasks: []protocol.TaskSpec{{Name: "one", Task: "sim: say one"}, {Name: "two", Task: "sim: say two"}}})
	res := waitRuns(t, c, parent, []string{job.JobID}, "", nil)
	if res.AggregateState != string(protocol.JobCompleted) {
		t.Fatalf("wait = %+v", res)
	}
	slow := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "slow", Task: "sim: sleep 30000"})
	run := slow.Runs[0].RunID
	waitRunState(t, c, run, protocol.RunActive)
	if err := c.Call(ctx(t), &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop), ParentAgentID: parent, Handle: run}, nil); err != nil {
		t.Fatalf("subagent.stop: %v", err)
	}
	waitRunState(t, c, run, protocol.RunCancelled)

	wants := runStates(map[protocol.RunState]float64{protocol.RunCompleted: 2, protocol.RunCancelled: 1})
	wants = append(wants,
		m("shard_run_transitions_total", 3, "from", "queued", "to", "starting"),
		m("shard_run_transitions_total", 3, "from", "starting", "to", "active"),
		m("shard_run_transitions_total", 2, "from", "active", "to", "completed"),
		m("shard_run_transitions_total", 1, "from", "active", "to", "cancelled"),
		m("shard_run_transitions_total", 9),
		m("shard_run_queue_wait_seconds", 3),
		m("shard_run_duration_seconds", 2, "state", "completed"),
		m("shard_run_duration_seconds", 1, "state", "cancelled"),
		m("shard_run_stop_stage_total", 1), // whichever stage ended it
		m("shard_reconcile_interrupted_total", 0),
		// The parent (idle, attached) accepts each completion report.
		m("shard_report_delivery_seconds", 3),
		// The parent and three children.
		m("shard_agents_by_runtime_state", 4),
	)
	f := h.expectMetrics(wants...)
	if f.value("shard_run_stop_stage_total", "stage", "abort")+f.value("shard_run_stop_stage_total", "stage", "term")+
		f.value("shard_run_stop_stage_total", "stage", "kill") != 1 {
		t.Fatalf("stop stages: %s", f.series("shard_run_stop_stage_total"))
	}
}

func TestMetricsReconciledRunsAfterRestart(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "slow", Task: "sim: sleep 30000"})
	waitRunState(t, c, job.Runs[0].RunID, protocol.RunActive)
	// A forced shutdown leaves the run active on disk, as a crash would.
	c.Close()
	h.d.Shutdown(true)

	h2 := startWith(t, h.cfg)
	wants := runStates(map[protocol.RunState]float64{protocol.RunInterrupted: 1})
	wants = append(wants,
		m("shard_reconcile_interrupted_total", 1),
		// Reconciliation is not a transition the new daemon made.
		m("shard_run_transitions_total", 0),
		// The report reaches the parent: its runtime is restored for it.
		m("shard_report_delivery_seconds", 1),
		m("shard_agents_by_runtime_state", 2),
	)
	h2.expectMetrics(wants...)
}
