package jobs

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

func TestReportText(t *testing.T) {
	tests := []struct {
		name    string
		state   protocol.RunState
		alias   string
		err     string
		final   string
		want    []string // substrings, in order
		notWant []string
	}{
		{
			name: "completed with final text", state: protocol.RunCompleted, alias: "ada", final: "the answer is 42",
			want:    []string{"[subagent report] run run-01 ", "job-01", "build", "agent-01", "alias ada", "ended: completed.", "\nfinal text:\nthe answer is 42"},
			notWant: []string{"error:"},
		},
		{
			name: "failed with error and partial text", state: protocol.RunFailed, err: "boom", final: "partial",
			want:    []string{"[subagent report] run run-01 ", "job-01", "ended: failed.", "\nerror: boom", "\nfinal text:\npartial"},
			notWant: []string{"alias"},
		},
		{
			name: "interrupted, nothing else", state: protocol.RunInterrupted, err: "interrupted by a daemon restart",
			want:    []string{"[subagent report] run run-01 ", "ended: interrupted.", "\nerror: interrupted by a daemon restart"},
			notWant: []string{"final text:"},
		},
		{
			name: "cancelled chain step", state: protocol.RunCancelled, alias: "grace", err: "chain halted by run-00",
			want: []string{"[subagent report] run run-01 ", "alias grace", "ended: cancelled.", "chain halted by run-00"},
		},
		{
			name: "timed out", state: protocol.RunTimedOut, err: "deadline exceeded",
			want: []string{"ended: timed_out.", "error: deadline exceeded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := &store.Job{JobID: "job-01", ParentAgentID: "agent-parent", Strategy: protocol.StrategyChain}
			run := &store.Run{
				RunID: "run-01", Name: "build", AgentID: "agent-01", Alias: tt.alias, Task: taskMarker,
				State: tt.state, Error: tt.err, FinalText: tt.final,
			}
			rep := reportOf(job, run, 4242)
			if rep.ParentAgentID != "agent-parent" || rep.CreatedAt != 4242 || rep.State != tt.state {
				t.Errorf("reportOf = %+v", rep)
			}
			text := ReportText(rep)
			if !strings.HasPrefix(text, "[subagent report] run run-01 ") {
				t.Errorf("report does not start with the stable prefix:\n%s", text)
			}
			rest := text
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("report lacks %q (in order):\n%s", w, text)
				}
				rest = rest[i+len(w):]
			}
			for _, w := range tt.notWant {
				if strings.Contains(text, w) {
					t.Errorf("report has %q:\n%s", w, text)
				}
			}
			b, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(text, "PRIVATE-TASK") || strings.Contains(string(b), "PRIVATE-TASK") {
				t.Errorf("report carries the task:\n%s\n%s", text, b)
			}
		})
	}
}

// TestReportTextNamesWorkspace: an isolated run's report names its
// workspace (id, branch, worktree) and its diff stat, or says the stat
// was not measured.
func TestReportTextNamesWorkspace(t *testing.T) {
	job := &store.Job{JobID: "job-01", ParentAgentID: "agent-parent", Strategy: protocol.StrategyParallel}
	run := &store.Run{RunID: "run-01", Name: "alpha", AgentID: "agent-01", State: protocol.RunCompleted,
		Workspace: &protocol.RunWorkspace{WorkspaceID: "workspace-01", Branch: "shard/alpha-1234", Cwd: "/wt/workspace-01",
			DiffStat: &protocol.DiffStats{Files: 2, Additions: 7, Deletions: 3}}}
	text := ReportText(reportOf(job, run, 1))
	want := "ended: completed.\nworkspace: workspace-01 (branch shard/alpha-1234, cwd /wt/workspace-01)\ndiff: 2 file(s) changed, +7 -3"
	if !strings.Contains(text, want) {
		t.Fatalf("report:\n%s\nwant it to contain:\n%s", text, want)
	}
	run.Workspace.DiffStat = nil
	if text := ReportText(reportOf(job, run, 1)); !strings.Contains(text, "workspace: workspace-01") || !strings.Contains(text, "diff: not measured") {
		t.Fatalf("report without a stat:\n%s", text)
	}
	run.Workspace = nil
	if text := ReportText(reportOf(job, run, 1)); strings.Contains(text, "workspace") || strings.Contains(text, "diff:") {
		t.Fatalf("report of a run without a workspace:\n%s", text)
	}
}

// TestReportTextFitsAPrompt: a report whose final text is larger than a
// prompt may be is cut to fit (the runtime would refuse it, and the report
// would be retried forever), at a rune boundary, saying how much was cut.
func TestReportTextFitsAPrompt(t *testing.T) {
	for _, final := range []string{
		strings.Repeat("x", protocol.MaxTextLen),
		strings.Repeat("é", protocol.MaxTextLen), // two bytes a rune
	} {
		rep := store.Report{RunID: "run-01", JobID: "job-01", AgentID: "agent-01", Name: "build", State: protocol.RunCompleted, FinalText: final}
		text := ReportText(rep)
		if len(text) > protocol.MaxTextLen {
			t.Fatalf("report is %d bytes, limit %d", len(text), protocol.MaxTextLen)
		}
		if !utf8.ValidString(text) || !strings.Contains(text, "bytes of final text cut]") {
			t.Fatalf("cut report is not valid UTF-8 or lacks the note: ...%q", text[len(text)-80:])
		}
		if len(text) < protocol.MaxTextLen-100 {
			t.Errorf("report cut to %d bytes, far below the limit %d", len(text), protocol.MaxTextLen)
		}
		if _, _, err := protocol.DecodeCommand(protocol.MustMarshal(protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt}, Message: text})); err != nil {
			t.Fatalf("the report as a prompt: %v", err)
		}
	}
}
