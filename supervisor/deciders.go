package supervisor

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// StopOnFailure is the strategy for actors that own an OS resource (a
// runtime process, a client connection): a panicking actor is stopped, never
// blindly restarted, because a fresh instance would have lost the process or
// socket. Its parent reacts to *actor.Terminated instead.
func StopOnFailure() actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(0, time.Second, func(any) actor.Directive {
		return actor.StopDirective
	})
}
