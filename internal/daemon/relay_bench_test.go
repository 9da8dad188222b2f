package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/protocol"
)

// benchDaemon starts an in-process daemon for a benchmark: fsync off,
// compaction off and a huge sim context window, so that long floods stream
// instead of compacting. It returns the daemon's socket path.
func benchDaemon(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("", "shb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	cfg := config.Default(filepath.Join(dir, "home"))
	cfg.Web.Port = 0
	cfg.Store.NoSync = true
	cfg.Compaction.Enabled = false
	cfg.Sim.ContextWindow = 1_000_000_000
	cfg.Kill.AbortGrace = 500 * time.Millisecond
	cfg.Kill.TermGrace = 500 * time.Millisecond
	cfg.Shutdown.Timeout = 5 * time.Second
	d, err := daemon.New(cfg, daemon.Options{
		Version: "bench", RuntimePath: runtimeBin, RuntimeArgs: []string{"agent", "--headless"},
		Environ: os.Environ(), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatalf("daemon.New: %v", err)
	}
	if err := d.Start(); err != nil {
		b.Fatalf("daemon.Start: %v", err)
	}
	b.Cleanup(func() { d.Shutdown(true) })
	return cfg.SocketPath()
}

// benchClient dials sock, creates a sim agent and attaches to it.
func benchClient(b *testing.B, sock string, id string) (*client.Conn, string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, sock)
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	b.Cleanup(func() { c.Close() })
	if id == "" {
		cwd, err := os.MkdirTemp("", "shb")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(cwd) })
		var data protocol.AgentCreateData
		if err := c.Call(ctx, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd}, &data); err != nil {
			b.Fatalf("agent.create: %v", err)
		}
		id = data.AgentID
	}
	if err := c.Call(ctx, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, nil); err != nil {
		b.Fatalf("agent.attach: %v", err)
	}
	for ev := range c.Events() {
		if s, ok := ev.Msg.(*protocol.Sync); ok && s.AgentID == id {
			return c, id
		}
	}
	b.Fatalf("connection ended before sync: %v", c.Err())
	return nil, ""
}

// floodOnce prompts `sim: flood n size` over ctl and waits until every
// client in cs has received the turn's end, checking that each received n
// text deltas.
func floodOnce(b *testing.B, ctl *client.Conn, cs []*client.Conn, id string, n, size int) {
	b.Helper()
	errs := make(chan error, len(cs))
	for _, c := range cs {
		go func() {
			got := 0
			timeout := time.After(5 * time.Minute)
			for {
				select {
				case ev, ok := <-c.Events():
					if !ok {
						errs <- fmt.Errorf("connection ended: %v", c.Err())
						return
					}
					switch m := ev.Msg.(type) {
					case *protocol.MessageDelta:
						if m.AgentID == id && m.Kind == protocol.DeltaText {
							got++
						}
					case *protocol.ErrorEvent:
						if m.Fatal {
							errs <- fmt.Errorf("fatal error event: %s", m.Message)
							return
						}
					case *protocol.TurnEnd:
						if m.AgentID == id {
							if got != n {
								errs <- fmt.Errorf("received %d of %d deltas", got, n)
							} else {
								errs <- nil
							}
							return
						}
					}
				case <-timeout:
					errs <- fmt.Errorf("no turn_end within 5m")
					return
				}
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ctl.Call(ctx, &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: id},
		Message: fmt.Sprintf("sim: flood %d %d", n, size)}, nil); err != nil {
		b.Fatalf("prompt: %v", err)
	}
	for range cs {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRelay measures the whole hot path of one event, in process:
// the real runtime binary's stdout → runtime actor → agent actor (type
// peek, agent_id splice) → outbox → unix-socket writer → client decode. One
// op is one 256-byte text delta delivered to one attached client (the
// relay scenario of bench/). Profile it with
//
//	go test ./daemon -run '^$' -bench Relay -cpuprofile cpu.out
//
// (the runtime child's own CPU is not in the profile).
func BenchmarkRelay(b *testing.B) {
	for _, clients := range []int{1, 10} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			sock := benchDaemon(b)
			ctl, id := benchClient(b, sock, "")
			cs := []*client.Conn{ctl}
			for len(cs) < clients {
				c, _ := benchClient(b, sock, id)
				cs = append(cs, c)
			}
			floodOnce(b, ctl, cs, id, 1000, 256) // warm-up
			const size = 256
			b.SetBytes(size)
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			// One flood is bounded by the sim (64 MiB); split large b.N.
			for left := b.N; left > 0; {
				n := min(left, 100_000)
				floodOnce(b, ctl, cs, id, n, size)
				left -= n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			// CPU of this process (daemon and clients, not the runtime
			// child) per event: steadier than wall time on a shared machine.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/event")
		})
	}
}

// processCPU returns the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
