package attend_test

import (
	"context"
	"errors"
	"log"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/team/attend"
)

// A coordinator watches its lead: the callback only forwards events (to
// an actor's mailbox, here a channel), and answers go out from a
// goroutine of its own, never from the callback.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mailbox := make(chan attend.Event, 256)
	w, err := attend.Watch(ctx, attend.Options{
		AgentID: "agent-01…", // the team's lead
		Dial: func(ctx context.Context) (*client.Conn, error) {
			return client.Dial(ctx, "/path/to/daemon.sock")
		},
		Events: func(ev attend.Event) { mailbox <- ev }, // never blocks long
	})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()

	seen := map[string]bool{} // a request is reported again after each resync
	for ev := range mailbox {
		switch e := ev.(type) {
		case attend.Request:
			if seen[e.RequestID] {
				continue
			}
			seen[e.RequestID] = true
			if e.Kind == attend.KindPermission {
				go func() {
					err := w.AnswerPermission(ctx, e.RequestID, protocol.OptionAllowOnce, "")
					if errors.Is(err, attend.ErrAnswered) {
						log.Printf("%s was answered by someone else first", e.RequestID)
					}
				}()
			}
		case attend.Resolved:
			delete(seen, e.RequestID)
		case attend.Stopped:
			return
		}
	}
}
