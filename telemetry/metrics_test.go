package telemetry_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/telemetry"
)

func TestNilMetricsRecordNothingAndServe404(t *testing.T) {
	var m *telemetry.Metrics
	m.ConnOpened("unix")
	m.ConnClosed("unix")
	m.SlowConsumerDropped("unix")
	m.AttachmentsAdd(1)
	m.AgentState("", protocol.RuntimeRunning)
	m.RuntimeStarted()
	m.RuntimeExited(telemetry.ExitCrash)
	m.RuntimeReaped()
	m.EventsRelayed(3)
	m.RunState("", protocol.RunQueued)
	m.RunTransition(protocol.RunQueued, protocol.RunStarting)
	m.ObserveQueueWait(time.Second)
	m.ObserveRunDuration(protocol.RunCompleted, time.Second)
	m.StopStage("kill")
	m.ReconciledInterrupted(2)
	m.ObserveCommit(time.Millisecond)
	m.ObserveReportDelivery(time.Second)
	if m.Registry() != nil {
		t.Fatal("nil Metrics has a registry")
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("nil Metrics handler = %d, want 404", rec.Code)
	}
}

func TestStateGaugesFollowTransitions(t *testing.T) {
	m := telemetry.New("v-test")
	m.AgentState("", protocol.RuntimeStopped)
	m.AgentState("", protocol.RuntimeStopped)
	m.AgentState(protocol.RuntimeStopped, protocol.RuntimeStarting)
	m.AgentState(protocol.RuntimeStarting, protocol.RuntimeRunning)
	m.AgentState(protocol.RuntimeRunning, protocol.RuntimeRunning) // no change
	m.RunState("", protocol.RunQueued)
	m.RunTransition(protocol.RunQueued, protocol.RunStarting)
	m.RunTransition(protocol.RunStarting, protocol.RunActive)
	m.RunState("", protocol.RunCompleted) // loaded terminal: not a transition

	want := `
# HELP shard_agents_by_runtime_state Durable agents by the state of their runtime process.
# TYPE shard_agents_by_runtime_state gauge
shard_agents_by_runtime_state{runtime_state="failed"} 0
shard_agents_by_runtime_state{runtime_state="running"} 1
shard_agents_by_runtime_state{runtime_state="starting"} 0
shard_agents_by_runtime_state{runtime_state="stopped"} 1
shard_agents_by_runtime_state{runtime_state="stopping"} 0
# HELP shard_run_transitions_total Persisted run state transitions, by previous and new state.
# TYPE shard_run_transitions_total counter
shard_run_transitions_total{from="queued",to="starting"} 1
shard_run_transitions_total{from="starting",to="active"} 1
# HELP shard_runs_by_state Subagent runs known to the daemon, by state.
# TYPE shard_runs_by_state gauge
shard_runs_by_state{state="active"} 1
shard_runs_by_state{state="cancelled"} 0
shard_runs_by_state{state="completed"} 1
shard_runs_by_state{state="failed"} 0
shard_runs_by_state{state="interrupted"} 0
shard_runs_by_state{state="queued"} 0
shard_runs_by_state{state="starting"} 0
shard_runs_by_state{state="timed_out"} 0
`
	body := scrape(t, m)
	for _, line := range strings.Split(strings.TrimSpace(want), "\n") {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("exposition lacks %q", line)
		}
	}
	if strings.Contains(body, `shard_run_transitions_total{from="",`) {
		t.Error("a loaded run counted as a transition")
	}
}

// scrape returns the text exposition m serves.
func scrape(t *testing.T, m *telemetry.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func TestHandlerServesTextExposition(t *testing.T) {
	m := telemetry.New("v-test")
	m.ObserveCommit(3 * time.Millisecond)
	m.ObserveQueueWait(-time.Second) // clock skew is clamped, not negative
	body := scrape(t, m)
	for _, s := range []string{
		`shard_build_info{protocol_version="` + protocol.Version + `",version="v-test"} 1`,
		"shard_bbolt_commit_seconds_count 1",
		"shard_run_queue_wait_seconds_sum 0",
		"go_goroutines ",
		"process_open_fds ",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("exposition lacks %q", s)
		}
	}
}
