package supervisor_test

import (
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/supervisor"
)

func TestReapable(t *testing.T) {
	t.Parallel()
	idleSince := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const timeout = 10 * time.Minute
	at := func(d time.Duration) time.Time { return idleSince.Add(d) }
	tests := []struct {
		name     string
		status   protocol.AgentStatus
		inflight int
		now      time.Time
		timeout  time.Duration
		want     bool
	}{
		{"idle, before timeout", protocol.StatusIdle, 0, at(timeout - time.Nanosecond), timeout, false},
		{"idle, at timeout", protocol.StatusIdle, 0, at(timeout), timeout, true},
		{"idle, after timeout", protocol.StatusIdle, 0, at(timeout + time.Hour), timeout, true},
		{"idle, just idle", protocol.StatusIdle, 0, idleSince, timeout, false},
		{"idle, clock before idleSince", protocol.StatusIdle, 0, at(-time.Hour), timeout, false},
		{"error status is reapable", protocol.StatusError, 0, at(timeout), timeout, true},
		{"unknown status is not active", protocol.AgentStatus("bogus"), 0, at(timeout), timeout, true},

		{"streaming never", protocol.StatusStreaming, 0, at(100 * timeout), timeout, false},
		{"waiting for permission never", protocol.StatusWaitingForPermission, 0, at(100 * timeout), timeout, false},
		{"waiting for ui never", protocol.StatusWaitingForUI, 0, at(100 * timeout), timeout, false},
		{"compacting never", protocol.StatusCompacting, 0, at(100 * timeout), timeout, false},

		{"command in flight", protocol.StatusIdle, 1, at(100 * timeout), timeout, false},
		{"many in flight", protocol.StatusIdle, 7, at(100 * timeout), timeout, false},
		{"negative inflight counts as none", protocol.StatusIdle, -1, at(timeout), timeout, true},

		{"zero timeout disables reaping", protocol.StatusIdle, 0, at(100 * time.Hour), 0, false},
		{"negative timeout disables reaping", protocol.StatusIdle, 0, at(100 * time.Hour), -time.Second, false},
		{"one nanosecond timeout", protocol.StatusIdle, 0, at(time.Nanosecond), time.Nanosecond, true},
	}
	for _, tt := range tests {
		if got := supervisor.Reapable(tt.status, tt.inflight, idleSince, tt.now, tt.timeout); got != tt.want {
			t.Errorf("%s: Reapable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
