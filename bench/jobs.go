//go:build linux

package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

type jobsPhase struct {
	Parents     int     `json:"parents"`
	Creates     int     `json:"creates"`
	Seconds     float64 `json:"seconds"`
	CreatesPerS float64 `json:"creates_per_s"`
	Ack         dist    `json:"ack_latency"`
}

// runJobs: --creates subagent.create calls spread over P concurrent parents
// (each a created agent with its own unix-socket connection issuing its
// creates back to back), on a fresh daemon per P. Each create is one task
// ("sim: say ok"); its runs execute meanwhile under the daemon's default
// jobs.max_active limits, as they would in real use.
func runJobs(o *options) (*report, error) {
	k := pick(o.creates, 200, 100, o.quick)
	ps, err := ints(o.parents, []int{1, 16})
	if err != nil {
		return nil, err
	}
	var phases []jobsPhase
	for _, p := range ps {
		mark := cleanupMark()
		ph, err := jobsPhaseRun(o, p, k)
		if err != nil {
			return nil, fmt.Errorf("%d parents: %w", p, err)
		}
		phases = append(phases, ph)
		runCleanupsFrom(mark) // this phase's daemon and everything it started
	}
	rep := &report{Header: []string{"parents", "creates", "creates/s", "ack p50 ms", "ack p99 ms", "ack max ms", "seconds"}, Results: phases}
	for _, ph := range phases {
		rep.Rows = append(rep.Rows, []string{fmt.Sprint(ph.Parents), fmt.Sprint(ph.Creates), f0(ph.CreatesPerS),
			f2(ph.Ack.P50), f2(ph.Ack.P99), f2(ph.Ack.Max), f3(ph.Seconds)})
	}
	sync := "on"
	if o.noSync {
		sync = "off (--no-sync)"
	}
	rep.Notes = append(rep.Notes, "ack latency: subagent.create sent → its response received; fsync "+sync+"; one fresh daemon per parent count")
	return rep, nil
}

func jobsPhaseRun(o *options, parents, creates int) (jobsPhase, error) {
	d, err := startDaemon(o, nil)
	if err != nil {
		return jobsPhase{}, err
	}
	ctl, err := d.dial()
	if err != nil {
		return jobsPhase{}, err
	}
	drain(ctl)
	ids := make([]string, parents)
	conns := make([]*client.Conn, parents)
	for i := range ids {
		if ids[i], err = createAgent(ctl); err != nil {
			return jobsPhase{}, err
		}
		if conns[i], err = d.dial(); err != nil {
			return jobsPhase{}, err
		}
		drain(conns[i])
	}
	lat := make([][]time.Duration, parents)
	errs := make([]error, parents)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range parents {
		n := creates / parents
		if i < creates%parents {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range n {
				cmd := &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate},
					ParentAgentID: ids[i], Name: fmt.Sprintf("b%d", j), Task: "sim: say ok"}
				t0 := time.Now()
				var data protocol.SubagentCreateData
				if err := call(conns[i], cmd, &data); err != nil {
					errs[i] = fmt.Errorf("subagent.create %d of parent %d: %w", j, i, err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	var all []time.Duration
	for i := range parents {
		if errs[i] != nil {
			return jobsPhase{}, errs[i]
		}
		all = append(all, lat[i]...)
	}
	return jobsPhase{Parents: parents, Creates: len(all), Seconds: wall.Seconds(),
		CreatesPerS: float64(len(all)) / wall.Seconds(), Ack: summarize(all)}, nil
}

// drain discards c's events so its reader never blocks.
func drain(c *client.Conn) {
	go func() {
		for range c.Events() {
		}
	}()
}
