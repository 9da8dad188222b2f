//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// relayRun is one measured flood.
type relayRun struct {
	Events   int     `json:"events"`
	Bytes    int64   `json:"text_bytes"`
	Seconds  float64 `json:"seconds"`
	EventsPS float64 `json:"events_per_s"`
	MBPS     float64 `json:"mb_per_s"`
	// CPU per relayed delta (daemon runs only): the daemon's, and the
	// driver's (its client decoding every record), in µs. Steadier than
	// the rates on a shared machine.
	DaemonUS float64 `json:"daemon_cpu_us_per_event,omitempty"`
	DriverUS float64 `json:"driver_cpu_us_per_event,omitempty"`
}

func newRelayRun(events int, bytes int64, d time.Duration) relayRun {
	s := d.Seconds()
	return relayRun{Events: events, Bytes: bytes, Seconds: s, EventsPS: float64(events) / s, MBPS: float64(bytes) / 1e6 / s}
}

type relayResult struct {
	N          int        `json:"n"`
	Bytes      int        `json:"bytes"`
	Reps       int        `json:"reps"`
	Daemon     []relayRun `json:"daemon"`
	Baseline   []relayRun `json:"baseline"`
	DaemonMed  relayRun   `json:"daemon_median"`
	BaseMed    relayRun   `json:"baseline_median"`
	RatioEvent float64    `json:"ratio_events"`
	RatioMB    float64    `json:"ratio_mb"`
	DaemonUS   float64    `json:"daemon_cpu_us_per_event"`
	DriverUS   float64    `json:"driver_cpu_us_per_event"`
	LoadAvg    float64    `json:"loadavg_1m"`
}

// runRelay: one agent floods to one attached unix-socket client, against
// the same runtime driven directly over its stdio pipes. Runs alternate
// (baseline, daemon) --reps times after one warm-up each; medians are
// compared.
func runRelay(o *options) (*report, error) {
	n := pick(o.n, 100000, 20000, o.quick)
	size := pick(o.bytes, 256, 256, o.quick)
	reps := pick(0, 5, 3, o.quick)
	flood := fmt.Sprintf("sim: flood %d %d", n, size)

	d, err := startDaemon(o, floodEnv)
	if err != nil {
		return nil, err
	}
	c, err := d.dial()
	if err != nil {
		return nil, err
	}
	id, err := createAgent(c)
	if err != nil {
		return nil, err
	}
	if _, _, err := attachSync(c, id); err != nil {
		return nil, err
	}
	base, err := startDirect(o)
	if err != nil {
		return nil, err
	}
	defer base.stop()

	res := relayResult{N: n, Bytes: size, Reps: reps}
	for i := 0; i <= reps; i++ { // i == 0 is the warm-up
		b, err := base.flood(flood)
		if err != nil {
			return nil, fmt.Errorf("baseline: %w", err)
		}
		c0 := d.cpu()
		r, err := daemonFlood(c, id, flood)
		if err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
		c1 := d.cpu()
		r.DaemonUS = float64((c1.daemon - c0.daemon).Microseconds()) / float64(max(r.Events, 1))
		r.DriverUS = float64((c1.driver - c0.driver).Microseconds()) / float64(max(r.Events, 1))
		if i > 0 {
			res.Baseline = append(res.Baseline, b)
			res.Daemon = append(res.Daemon, r)
		}
	}
	for _, r := range append(res.Daemon, res.Baseline...) {
		if r.Events != n {
			return nil, fmt.Errorf("a flood delivered %d of %d deltas", r.Events, n)
		}
	}
	res.DaemonMed, res.BaseMed = medianRun(res.Daemon), medianRun(res.Baseline)
	res.RatioEvent = res.DaemonMed.EventsPS / res.BaseMed.EventsPS
	res.RatioMB = res.DaemonMed.MBPS / res.BaseMed.MBPS
	res.DaemonUS, res.DriverUS = medianOf(res.Daemon, func(r relayRun) float64 { return r.DaemonUS }),
		medianOf(res.Daemon, func(r relayRun) float64 { return r.DriverUS })
	res.LoadAvg = loadAvg()

	rep := &report{Header: []string{"path", "deltas", "bytes/delta", "events/s", "MB/s", "seconds", "ratio", "daemon µs/ev", "driver µs/ev"}, Results: res}
	row := func(name string, r relayRun, ratio, dus, cus string) {
		rep.Rows = append(rep.Rows, []string{name, fmt.Sprint(r.Events), fmt.Sprint(size), f0(r.EventsPS), f2(r.MBPS), f3(r.Seconds), ratio, dus, cus})
	}
	row("baseline (stdio)", res.BaseMed, "1.00", "", "")
	row("daemon (unix)", res.DaemonMed, f2(res.RatioEvent), f2(res.DaemonUS), f2(res.DriverUS))
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("median of %d alternating runs after one warm-up; time is prompt sent → turn_end received; both sides decode every record with protocol.DecodeEvent", reps),
		"µs/ev: CPU time per delta over a daemon flood (medians): the daemon's, and the driver's (its client reading and decoding); load average at the end "+f2(res.LoadAvg))
	return rep, nil
}

// medianOf is the median of f over rs.
func medianOf(rs []relayRun, f func(relayRun) float64) float64 {
	v := make([]float64, 0, len(rs))
	for _, r := range rs {
		v = append(v, f(r))
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

func medianRun(rs []relayRun) relayRun {
	s := append([]relayRun(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].EventsPS < s[j].EventsPS })
	return s[len(s)/2]
}

// daemonFlood prompts the flood through the daemon and counts the text
// deltas c receives until turn_end. c must be attached to id and its events
// must not be read elsewhere.
func daemonFlood(c *client.Conn, id, flood string) (relayRun, error) {
	type out struct {
		events int
		bytes  int64
		end    time.Time
		err    error
	}
	done := make(chan out, 1)
	go func() {
		var o out
		var fatal string // a fatal error event before the end (slow consumer)
		timeout := time.After(5 * time.Minute)
		for {
			select {
			case ev, ok := <-c.Events():
				if !ok {
					o.err = fmt.Errorf("connection ended: %v", c.Err())
					if fatal != "" {
						o.err = fmt.Errorf("connection ended after the fatal error %q (%v)", fatal, c.Err())
					}
					done <- o
					return
				}
				switch m := ev.Msg.(type) {
				case *protocol.ErrorEvent:
					if m.Fatal {
						fatal = m.Message
					}
				case *protocol.MessageDelta:
					if m.AgentID == id && m.Kind == protocol.DeltaText {
						o.events++
						o.bytes += int64(len(m.TextDelta))
					}
				case *protocol.TurnEnd:
					if m.AgentID == id {
						o.end = time.Now()
						done <- o
						return
					}
				}
			case <-timeout:
				o.err = fmt.Errorf("no turn_end within 5m")
				done <- o
				return
			}
		}
	}()
	start := time.Now()
	if err := prompt(c, id, flood); err != nil {
		return relayRun{}, err
	}
	r := <-done
	if r.err != nil {
		return relayRun{}, r.err
	}
	return newRelayRun(r.events, r.bytes, r.end.Sub(start)), nil
}

// direct is the runtime binary run by hand, its stdio piped to the driver.
type direct struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	home string
	seq  int
}

func startDirect(o *options) (*direct, error) {
	dir, err := tempDir()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	cmd := exec.Command(o.shardd, "agent", "--headless")
	cmd.Dir = dir
	cmd.Env = cleanEnv(append([]string{"SHARD_HOME=" + home}, floodEnv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start runtime: %w", err)
	}
	dr := &direct{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10), home: home}
	atCleanup(dr.stop)
	return dr, nil
}

func (dr *direct) stop() {
	if dr.cmd.ProcessState == nil {
		_ = dr.in.Close()
		_ = dr.cmd.Process.Kill()
		_ = dr.cmd.Wait()
	}
	killEnv("SHARD_HOME=" + dr.home)
}

// flood prompts the runtime directly and reads its stdout until turn_end.
func (dr *direct) flood(flood string) (relayRun, error) {
	dr.seq++
	rec, err := json.Marshal(&protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: fmt.Sprint("b", dr.seq)}, Message: flood})
	if err != nil {
		return relayRun{}, err
	}
	start := time.Now()
	if _, err := dr.in.Write(append(rec, '\n')); err != nil {
		return relayRun{}, err
	}
	var events int
	var bytes int64
	for {
		line, err := dr.out.ReadBytes('\n')
		if err != nil {
			return relayRun{}, fmt.Errorf("read runtime stdout: %w", err)
		}
		msg, err := protocol.DecodeEvent(line[:len(line)-1])
		if err != nil {
			continue
		}
		switch m := msg.(type) {
		case *protocol.MessageDelta:
			if m.Kind == protocol.DeltaText {
				events++
				bytes += int64(len(m.TextDelta))
			}
		case *protocol.Response:
			if !m.Success && m.ID == rec2id(dr.seq) {
				return relayRun{}, fmt.Errorf("prompt refused: %s", m.Error.Message)
			}
		case *protocol.TurnEnd:
			return newRelayRun(events, bytes, time.Since(start)), nil
		}
	}
}

func rec2id(seq int) string { return fmt.Sprint("b", seq) }
