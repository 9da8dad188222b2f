package main

import (
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestAggregateState pins jobs wait's aggregate_state, now derived through
// jobs/view, to the values the daemon reports for each mix of run states.
func TestAggregateState(t *testing.T) {
	tests := []struct {
		name   string
		states []protocol.RunState
		want   string
	}{
		{"none", nil, string(protocol.JobCompleted)},
		{"all queued", []protocol.RunState{protocol.RunQueued, protocol.RunQueued}, string(protocol.JobQueued)},
		{"queued and active", []protocol.RunState{protocol.RunQueued, protocol.RunActive}, string(protocol.JobRunning)},
		{"starting", []protocol.RunState{protocol.RunStarting}, string(protocol.JobRunning)},
		{"some ended", []protocol.RunState{protocol.RunCompleted, protocol.RunActive}, "mixed"},
		{"ended and queued", []protocol.RunState{protocol.RunFailed, protocol.RunQueued}, "mixed"},
		{"all completed", []protocol.RunState{protocol.RunCompleted, protocol.RunCompleted}, string(protocol.JobCompleted)},
		{"one failed", []protocol.RunState{protocol.RunCompleted, protocol.RunFailed}, string(protocol.JobFailed)},
		{"timed out", []protocol.RunState{protocol.RunTimedOut}, string(protocol.JobFailed)},
		{"interrupted", []protocol.RunState{protocol.RunInterrupted, protocol.RunCancelled}, string(protocol.JobFailed)},
		{"cancelled", []protocol.RunState{protocol.RunCompleted, protocol.RunCancelled}, string(protocol.JobCancelled)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := make([]protocol.RunSnapshot, len(tt.states))
			for i, s := range tt.states {
				runs[i].State = s
			}
			if got := aggregateState(runs); got != tt.want {
				t.Errorf("aggregateState(%v) = %q; want %q", tt.states, got, tt.want)
			}
		})
	}
}
