package main

import (
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestStopNoteSaysWhatTheStopCovered: stopping one run of a parallel job
// does not label the whole job stopped.
func TestStopNoteSaysWhatTheStopCovered(t *testing.T) {
	run := func(stopAt int64) protocol.OpRun { return protocol.OpRun{StopRequestedAt: stopAt} }
	for _, tt := range []struct {
		job  protocol.OpJob
		want string
	}{
		{protocol.OpJob{Runs: []protocol.OpRun{run(0), run(0)}}, ""},
		{protocol.OpJob{StoppedAt: 5, Runs: []protocol.OpRun{run(5), run(0), run(0)}}, "stopped 1 of 3 runs"},
		{protocol.OpJob{StoppedAt: 5, Runs: []protocol.OpRun{run(5), run(5)}}, "stopped"},
	} {
		if got := stopNote(tt.job); got != tt.want {
			t.Errorf("stopNote(%+v) = %q, want %q", tt.job, got, tt.want)
		}
		if got := jobNote(tt.job); got != tt.want {
			t.Errorf("jobNote = %q, want %q", got, tt.want)
		}
	}
}
