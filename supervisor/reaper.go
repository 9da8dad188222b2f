package supervisor

import (
	"time"

	"github.com/shard-dev/shard/protocol"
)

// Reapable reports whether a running runtime with the given status may be
// stopped for inactivity now. Active states (streaming, waiting for
// permission or UI, compacting) never expire (docs/protocol.md §6.4); neither
// does a runtime with commands in flight.
func Reapable(status protocol.AgentStatus, inflight int, idleSince, now time.Time, timeout time.Duration) bool {
	if status.Active() || inflight > 0 || timeout <= 0 {
		return false
	}
	return !now.Before(idleSince.Add(timeout))
}
