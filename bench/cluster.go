//go:build linux

package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// The cluster scenario: the single-node figures again, on one shardd and
// on a cluster of shardd nodes on this machine (embedded NATS JetStream,
// loopback routes through clustertest relays, random ports, temporary
// homes).
//
//	create  agent.create acknowledgement latency and creates/s, spread
//	        round-robin over the nodes' sockets; on a cluster also the time
//	        until every node lists every agent with its node (the agent
//	        directory).
//	wake    a stopped agent's runtime started again by a prompt: prompt
//	        sent → its acknowledgement, → the turn's first event
//	        (turn_start), → turn_end, on the attached connection of the
//	        agent's own node.
//	live    for 1, 2 and 3 nodes, --live-per-node agents per node created,
//	        attached and prompted once; then the runtimes running on each
//	        node, the memory of the daemons and of their runtime children,
//	        and what one more live agent costs.
//	attach  one agent on n3 of three nodes, attached and streamed through
//	        n3 (same node) and through n1 (cross node): attach → sync,
//	        prompt → first delta, and per-delta latency and throughput of
//	        a paced and an unpaced stamped flood (clusterattach.go).
//	passive the first prompt to a passivated agent of n3 (its actor gone
//	        after 30 s idle), through n3 and through n1
//	        (clusterpassive.go).
//	scan    InterruptNodeRuns, Requeue and runner.HeldBy's listing against
//	        the run records kept (clusterscan.go).
//
// A single shardd is the 1-node figure: a cluster node needs the route of
// at least one other node (cluster.routes), so there is no one-node
// cluster.

const (
	// clusterReady bounds a node's start: a node serves only once a
	// quorum of its cluster is up (a JetStream meta-leader), which takes
	// seconds on a loaded 2-core machine.
	clusterReady = 90 * time.Second
	// clusterWorkers is how many agent.create calls are in flight at once
	// across the nodes (scale's, so the 1-node figure matches it).
	clusterWorkers = scaleWorkers
	// clusterDirWait bounds the wait for every node to list every agent.
	clusterDirWait = 60 * time.Second
)

// clusterView is what one node's cluster.status said after a phase: the
// proof that the nodes formed one cluster.
type clusterView struct {
	Node  string   `json:"node"`
	Alive []string `json:"alive"`
	// Agents is the agents the node's agent.list holds, and Misplaced
	// those it lists on another node than the one that created them (or
	// not at all).
	Agents    int `json:"agents_listed"`
	Misplaced int `json:"agents_misplaced"`
}

// ---- create ----

// clusterCreate is the create phase on k nodes.
type clusterCreate struct {
	Nodes    int     `json:"nodes"`
	Creates  int     `json:"creates"`
	InFlight int     `json:"in_flight"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"creates_per_s"`
	Ack      dist    `json:"create_ack"` // agent.create sent → acknowledged (the runtime ready)
	PerNode  []int   `json:"per_node"`
	// DaemonCPUms and RuntimeCPUms are the CPU time (user + system) per
	// create of the nodes' shardd processes (embedded NATS included) and
	// of their runtime children, summed over the nodes: on 2 cores shared
	// by every node, the CPU a create costs bounds creates/s.
	DaemonCPUms  float64 `json:"daemon_cpu_ms_per_create"`
	RuntimeCPUms float64 `json:"runtime_cpu_ms_per_create"`
	// DirectorySeconds: the last acknowledgement → every node lists every
	// agent on the node that created it (a cluster only).
	DirectorySeconds float64       `json:"directory_converged_s,omitempty"`
	Views            []clusterView `json:"views,omitempty"`
}

// createSpread creates n agents, clusterWorkers in flight, agent i on
// node i mod k through that node's connection; it returns each agent's id
// and node index, and the phase's figures.
func createSpread(cl *clusterOf, conns []*client.Conn, n int) ([]string, []int, clusterCreate, error) {
	k := len(cl.nodes)
	ph := clusterCreate{Nodes: k, Creates: n, InFlight: clusterWorkers, PerNode: make([]int, k)}
	cwd, err := tempDir()
	if err != nil {
		return nil, nil, ph, err
	}
	ids := make([]string, n)
	where := make([]int, n)
	lat := make([]time.Duration, n)
	cpu0 := make([]cpuSnap, k)
	for i, d := range cl.nodes {
		cpu0[i] = d.cpu()
	}
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range clusterWorkers {
		wg.Go(func() {
			for i := range next {
				t := time.Now()
				var data protocol.AgentCreateData
				errs[i] = call(conns[i%k], &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd}, &data)
				lat[i] = time.Since(t)
				ids[i], where[i] = data.AgentID, i%k
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return nil, nil, ph, fmt.Errorf("agent.create: %w", err)
	}
	for _, w := range where {
		ph.PerNode[w]++
	}
	for i, d := range cl.nodes {
		c := d.cpu()
		ph.DaemonCPUms += ms(c.daemon-cpu0[i].daemon) / float64(n)
		ph.RuntimeCPUms += ms(c.children-cpu0[i].children) / float64(n)
	}
	ph.Seconds = took.Seconds()
	ph.PerSec = float64(n) / took.Seconds()
	ph.Ack = summarize(lat)
	return ids, where, ph, nil
}

// listAll is c's whole agent.list.
func listAll(c *client.Conn) ([]protocol.AgentInfo, error) {
	var data protocol.AgentListData
	if err := call(c, &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &data); err != nil {
		return nil, err
	}
	return data.Agents, nil
}

// viewsOf asks every node of cl for its cluster.status and agent.list and
// counts, of ids (created on the nodes where says), those it does not
// list on their node.
func viewsOf(cl *clusterOf, conns []*client.Conn, ids []string, where []int) ([]clusterView, error) {
	var views []clusterView
	for i, c := range conns {
		st, err := clusterStatus(c)
		if err != nil {
			return nil, err
		}
		list, err := listAll(c)
		if err != nil {
			return nil, err
		}
		node := map[string]string{}
		for _, in := range list {
			node[in.AgentID] = in.Node
		}
		v := clusterView{Node: cl.names[i], Alive: aliveNodes(st), Agents: len(list)}
		for j, id := range ids {
			if got, ok := node[id]; !ok || got != cl.names[where[j]] {
				v.Misplaced++
			}
		}
		views = append(views, v)
	}
	return views, nil
}

// waitDirectory waits until every node lists every agent of ids on its
// node, and returns the nodes' views at that moment (or at the bound).
func waitDirectory(cl *clusterOf, conns []*client.Conn, ids []string, where []int) ([]clusterView, error) {
	deadline := time.Now().Add(clusterDirWait)
	for {
		views, err := viewsOf(cl, conns, ids, where)
		if err != nil {
			return nil, err
		}
		done := true
		for _, v := range views {
			done = done && v.Misplaced == 0
		}
		if done || time.Now().After(deadline) {
			return views, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---- wake ----

// clusterWake is the wake phase on k nodes.
type clusterWake struct {
	Nodes   int  `json:"nodes"`
	Samples int  `json:"samples"`
	Ack     dist `json:"prompt_ack"`        // prompt sent → acknowledged
	First   dist `json:"first_event"`       // prompt sent → turn_start
	TurnEnd dist `json:"turn_end"`          // prompt sent → turn_end
	Stop    dist `json:"terminate_stopped"` // agent.terminate sent → runtime_state stopped
}

// eventTap reads a connection's events and hands those of the agent it
// is told to watch, with their arrival time, to whoever waits.
type eventTap struct {
	c    *client.Conn
	evs  chan tapped
	dead chan struct{}
}

type tapped struct {
	typ   string
	agent string
	at    time.Time
}

func newEventTap(c *client.Conn) *eventTap {
	t := &eventTap{c: c, evs: make(chan tapped, 4096), dead: make(chan struct{})}
	go func() {
		defer close(t.dead)
		for ev := range c.Events() {
			at := time.Now()
			h := ev.Msg.Head()
			select {
			case t.evs <- tapped{typ: h.Type, agent: h.AgentID, at: at}:
			default: // nobody reads that far behind: a broadcast burst
			}
		}
	}()
	return t
}

// await waits for an event of type typ for agent id.
func (t *eventTap) await(id, typ string) (time.Time, error) {
	timeout := time.After(reqTimeout)
	for {
		select {
		case e := <-t.evs:
			if e.agent == id && e.typ == typ {
				return e.at, nil
			}
		case <-t.dead:
			return time.Time{}, fmt.Errorf("connection ended waiting for %s: %v", typ, t.c.Err())
		case <-timeout:
			return time.Time{}, fmt.Errorf("no %s of %s within %s", typ, id, reqTimeout)
		}
	}
}

// flush drops the events read so far.
func (t *eventTap) flush() {
	for {
		select {
		case <-t.evs:
		default:
			return
		}
	}
}

// runtimeState is agent id's runtime_state as c's agent.status says.
func runtimeState(c *client.Conn, id string) (protocol.RuntimeState, error) {
	var st protocol.AgentListData
	if err := call(c, &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}}, &st); err != nil {
		return "", err
	}
	if len(st.Agents) != 1 {
		return "", fmt.Errorf("agent.status of %s: %d agents", id, len(st.Agents))
	}
	return st.Agents[0].RuntimeState, nil
}

// wakeSamples: one agent per node, attached on its node's connection;
// for each sample (node s mod k) the agent's runtime is stopped
// (agent.terminate, then agent.status until stopped), then prompted.
func wakeSamples(cl *clusterOf, samples int) (clusterWake, error) {
	k := len(cl.nodes)
	ph := clusterWake{Nodes: k, Samples: samples}
	taps := make([]*eventTap, k)
	ids := make([]string, k)
	for i, d := range cl.nodes {
		c, err := d.dial()
		if err != nil {
			return ph, err
		}
		id, err := createAgent(c)
		if err != nil {
			return ph, err
		}
		ids[i], taps[i] = id, newEventTap(c)
		if err := call(c, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, nil); err != nil {
			return ph, fmt.Errorf("agent.attach: %w", err)
		}
		if _, err := taps[i].await(id, protocol.TypeSync); err != nil {
			return ph, err
		}
	}
	var acks, firsts, ends, stops []time.Duration
	for s := range samples {
		i := s % k
		tap, id := taps[i], ids[i]
		t0 := time.Now()
		if err := call(tap.c, &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, nil); err != nil {
			return ph, fmt.Errorf("agent.terminate: %w", err)
		}
		for {
			st, err := runtimeState(tap.c, id)
			if err != nil {
				return ph, err
			}
			if st == protocol.RuntimeStopped {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		stops = append(stops, time.Since(t0))
		tap.flush()
		t0 = time.Now()
		if err := prompt(tap.c, id, "sim: say hi"); err != nil {
			return ph, fmt.Errorf("prompt: %w", err)
		}
		acks = append(acks, time.Since(t0))
		first, err := tap.await(id, protocol.TypeTurnStart)
		if err != nil {
			return ph, err
		}
		end, err := tap.await(id, protocol.TypeTurnEnd)
		if err != nil {
			return ph, err
		}
		firsts, ends = append(firsts, first.Sub(t0)), append(ends, end.Sub(t0))
	}
	ph.Ack, ph.First, ph.TurnEnd, ph.Stop = summarize(acks), summarize(firsts), summarize(ends), summarize(stops)
	return ph, nil
}

// waitStopped waits until no runtime runs on any node of cl.
func waitStopped(cl *clusterOf) error {
	deadline := time.Now().Add(clusterDirWait)
	for _, d := range cl.nodes {
		for {
			m, err := d.metrics()
			if err != nil {
				return err
			}
			if m[`shard_agents_by_runtime_state{runtime_state="running"}`] == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("runtimes still running %s after agent.terminate", clusterDirWait)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// ---- live ----

// clusterLive is the live phase on k nodes.
type clusterLive struct {
	Nodes   int `json:"nodes"`
	PerNode int `json:"per_node_asked"`
	Asked   int `json:"asked"`
	Created int `json:"created"`
	// Live is the runtimes running at the snapshot, over every node
	// (shard_agents_by_runtime_state{running}); LivePerNode per node.
	Live          int     `json:"live"`
	LivePerNode   []int   `json:"live_per_node"`
	SpawnSeconds  float64 `json:"time_to_all_ready_s"`
	SpawnRate     float64 `json:"spawn_rate_agents_per_s"`
	PromptSeconds float64 `json:"attach_prompt_all_s"`
	// DaemonsBeforeKiB and DaemonsLiveKiB are the nodes' shardd RSS
	// summed (each with its embedded NATS server), before spawning and
	// with every runtime live; DaemonKiBPerAgent their growth per agent.
	DaemonsBeforeKiB  int64   `json:"daemons_rss_before_kib"`
	DaemonsLiveKiB    int64   `json:"daemons_rss_live_kib"`
	DaemonKiBPerAgent float64 `json:"daemon_kib_per_agent"`
	// ChildPSSKiB and ChildRSSKiB are the mean live runtime child's.
	ChildPSSKiB float64 `json:"child_pss_kib_mean"`
	ChildRSSKiB float64 `json:"child_rss_kib_mean"`
	// KiBPerAgent is what one more live agent costs the machine: the
	// daemons' growth per agent + a child's PSS.
	KiBPerAgent float64 `json:"kib_per_live_agent"`
	MemAvailKiB int64   `json:"mem_available_kib_live"`
	// Bound says why the phase stopped short of Asked, if it did.
	Bound string        `json:"bound,omitempty"`
	Views []clusterView `json:"views,omitempty"`
}

// liveRun: on k fresh nodes, per agents per node are created (round
// robin over the nodes' sockets), attached and prompted once on shared
// connections of their node; after the runtimes' idle trim, the nodes'
// memory and runtimes.
func liveRun(o *options, k, per int) (clusterLive, error) {
	ph := clusterLive{Nodes: k, PerNode: per, Asked: k * per}
	// No runtime is reaped while the phase runs.
	cl, err := startNodes(o, k, []string{"SHARD_RUNTIME_IDLE_TIMEOUT=1h"})
	if err != nil {
		return ph, err
	}
	ctls := make([]*client.Conn, k)
	conns := make([][]*scaleConn, k)
	for i, d := range cl.nodes {
		if ctls[i], err = d.dial(); err != nil {
			return ph, err
		}
		drain(ctls[i])
		for range (per + scaleAgentsPerConn - 1) / scaleAgentsPerConn {
			c, err := d.dial()
			if err != nil {
				return ph, err
			}
			conns[i] = append(conns[i], newScaleConn(c))
		}
	}
	time.Sleep(scaleSettle)
	for _, d := range cl.nodes {
		rss, err := d.rssKiB()
		if err != nil {
			return ph, err
		}
		ph.DaemonsBeforeKiB += rss
	}
	cwd, err := tempDir()
	if err != nil {
		return ph, err
	}

	// Spawn, clusterWorkers in flight, until every node has per agents or
	// memory runs low (scaleMemFloor).
	n := k * per
	ids := make([]string, n)
	errs := make([]error, n)
	var lowMem atomic.Bool
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range clusterWorkers {
		wg.Go(func() {
			for i := range next {
				var data protocol.AgentCreateData
				errs[i] = call(ctls[i%k], &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd}, &data)
				ids[i] = data.AgentID
				if avail, err := memAvailableKiB(); err == nil && avail < scaleMemFloor {
					lowMem.Store(true)
				}
			}
		})
	}
	for i := range n {
		if lowMem.Load() {
			ph.Bound = fmt.Sprintf("MemAvailable fell under %d MiB", scaleMemFloor>>10)
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	spawn := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return ph, fmt.Errorf("agent.create: %w", err)
	}
	var made []int // indices of the agents created
	for i, id := range ids {
		if id != "" {
			made = append(made, i)
		}
	}
	ph.Created = len(made)
	if ph.Created == 0 {
		return ph, errors.New("no agent created")
	}
	ph.SpawnSeconds = spawn.Seconds()
	ph.SpawnRate = float64(ph.Created) / spawn.Seconds()

	// Attach and prompt each on its node.
	start = time.Now()
	pnext := make(chan int)
	perr := make([]error, n)
	for range clusterWorkers {
		wg.Go(func() {
			for i := range pnext {
				node, nth := i%k, i/k
				perr[i] = scaleAttachPrompt(conns[node][nth/scaleAgentsPerConn], ids[i])
			}
		})
	}
	for _, i := range made {
		pnext <- i
	}
	close(pnext)
	wg.Wait()
	ph.PromptSeconds = time.Since(start).Seconds()
	if err := errors.Join(perr...); err != nil {
		return ph, fmt.Errorf("attach and prompt: %w", err)
	}

	// Idle, every runtime live.
	time.Sleep(scaleIdleSettle)
	var pss, rss int64
	var children int
	for _, d := range cl.nodes {
		m, err := d.metrics()
		if err != nil {
			return ph, err
		}
		live := int(m[`shard_agents_by_runtime_state{runtime_state="running"}`])
		ph.LivePerNode = append(ph.LivePerNode, live)
		ph.Live += live
		r, err := d.rssKiB()
		if err != nil {
			return ph, err
		}
		ph.DaemonsLiveKiB += r
		cm := d.childrenMemKiB()
		pss, rss, children = pss+cm.PSS, rss+cm.RSS, children+cm.N
	}
	ph.MemAvailKiB, _ = memAvailableKiB()
	ph.DaemonKiBPerAgent = float64(ph.DaemonsLiveKiB-ph.DaemonsBeforeKiB) / float64(ph.Created)
	if children > 0 {
		ph.ChildPSSKiB = float64(pss) / float64(children)
		ph.ChildRSSKiB = float64(rss) / float64(children)
	}
	ph.KiBPerAgent = ph.DaemonKiBPerAgent + ph.ChildPSSKiB
	if k > 1 {
		created := make([]string, 0, len(made))
		where := make([]int, 0, len(made))
		for _, i := range made {
			created, where = append(created, ids[i]), append(where, i%k)
		}
		if ph.Views, err = waitDirectory(cl, ctls, created, where); err != nil {
			return ph, err
		}
	}
	return ph, nil
}

// ---- the scenario ----

// clusterResult is the JSON result of the cluster scenario.
type clusterResult struct {
	Create []clusterCreate `json:"create,omitempty"`
	Wake   []clusterWake   `json:"wake,omitempty"`
	Live   []clusterLive   `json:"live,omitempty"`
	Attach []attachPath    `json:"attach,omitempty"`
	Scan   []clusterScan   `json:"scan,omitempty"`
	// Passive is the first prompt to a passivated agent of n3, through
	// n3 and through n1 (clusterpassive.go).
	Passive []passivePath `json:"passive,omitempty"`
}

func runCluster(o *options) (*report, error) {
	creates := pick(o.creates, 300, 30, o.quick)
	samples := pick(o.waitSamples, 60, 6, o.quick)
	per := pick(o.livePerNode, 300, 5, o.quick)
	nodes, err := ints(o.nodes, []int{1, 3})
	if err != nil {
		return nil, err
	}
	liveNodes, err := ints(o.liveNodes, []int{1, 2, 3})
	if err != nil {
		return nil, err
	}
	attachSamplesN := pick(o.samples, 50, 5, o.quick)
	paced := pick(o.n, 5000, 500, o.quick)
	unpaced := paced
	rate := pick(o.rate, fanoutTargetRate, fanoutTargetRate, o.quick)
	scanSizes, err := ints(o.runs, []int{1000, 4000, 16000})
	if err != nil {
		return nil, err
	}
	if o.quick && o.runs == "" {
		scanSizes = []int{200, 1000}
	}
	phases := map[string]bool{"create": true, "wake": true, "live": true, "attach": true, "scan": true, "passive": true}
	if o.phases != "" {
		phases = map[string]bool{}
		for p := range strings.SplitSeq(o.phases, ",") {
			phases[strings.TrimSpace(p)] = true
		}
	}
	var res clusterResult
	var notes []string

	if !phases["create"] && !phases["wake"] {
		nodes = nil
	}
	if phases["attach"] && !slices.Contains(nodes, 3) {
		nodes = append(nodes, 3) // the attach phase runs on three nodes
	}
	for _, k := range nodes {
		mark := cleanupMark()
		err := func() error {
			cl, err := startNodes(o, k, floodEnv)
			if err != nil {
				return err
			}
			conns := make([]*client.Conn, k)
			for i, d := range cl.nodes {
				if conns[i], err = d.dial(); err != nil {
					return err
				}
				drain(conns[i])
			}
			if phases["create"] {
				ids, where, ph, err := createSpread(cl, conns, creates)
				if err != nil {
					return err
				}
				if k > 1 {
					t := time.Now()
					if ph.Views, err = waitDirectory(cl, conns, ids, where); err != nil {
						return err
					}
					ph.DirectorySeconds = time.Since(t).Seconds()
				}
				res.Create = append(res.Create, ph)
				// The create phase's runtimes are stopped before the
				// wake-up samples, so these run beside no more than
				// the nodes' own idle agents.
				for i, id := range ids {
					if err := call(conns[where[i]], &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, nil); err != nil {
						return fmt.Errorf("agent.terminate: %w", err)
					}
				}
			}
			if phases["wake"] {
				if err := waitStopped(cl); err != nil {
					return err
				}
				ph, err := wakeSamples(cl, samples)
				if err != nil {
					return err
				}
				res.Wake = append(res.Wake, ph)
			}
			if k == 3 && phases["attach"] {
				paths, err := attachOn(cl, attachSamplesN, paced, unpaced, rate)
				if err != nil {
					return fmt.Errorf("attach: %w", err)
				}
				res.Attach = paths
			}
			return nil
		}()
		runCleanupsFrom(mark)
		if err != nil {
			return nil, fmt.Errorf("%d nodes: %w", k, err)
		}
	}
	if phases["live"] {
		childKiB := float64(scaleChildGuess)
		for _, k := range liveNodes {
			avail, err := memAvailableKiB()
			if err != nil {
				return nil, err
			}
			if need := int64(float64(k*per)*childKiB) + scaleMemFloor; avail < need {
				notes = append(notes, fmt.Sprintf("live: stopped before %d nodes: MemAvailable %d MiB < %d MiB needed", k, avail>>10, need>>10))
				break
			}
			mark := cleanupMark()
			ph, err := liveRun(o, k, per)
			runCleanupsFrom(mark)
			if err != nil {
				return nil, fmt.Errorf("live, %d nodes: %w", k, err)
			}
			if ph.ChildPSSKiB > 0 {
				childKiB = 2 * ph.ChildPSSKiB
			}
			res.Live = append(res.Live, ph)
			if ph.Bound != "" {
				notes = append(notes, fmt.Sprintf("live, %d nodes: stopped at %d of %d agents: %s", k, ph.Created, ph.Asked, ph.Bound))
				break
			}
		}
	}

	passiveN := max(1, samples/2)
	if phases["passive"] {
		mark := cleanupMark()
		ps, err := passiveRun(o, passiveN)
		runCleanupsFrom(mark)
		if err != nil {
			return nil, fmt.Errorf("passive: %w", err)
		}
		res.Passive = ps
	}
	if phases["scan"] {
		mark := cleanupMark()
		sc, err := scanRun(o, scanSizes)
		runCleanupsFrom(mark)
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		res.Scan = sc
	}

	rep := &report{Header: []string{"phase", "nodes", "n", "per s", "p50 ms", "p99 ms", "max ms", "other"}, Results: res}
	for _, c := range res.Create {
		other := fmt.Sprintf("per node %v; CPU ms/create: daemons %s, runtimes %s", c.PerNode, f2(c.DaemonCPUms), f2(c.RuntimeCPUms))
		if c.Nodes > 1 {
			other += fmt.Sprintf("; every node lists all %s s after the last ack", f3(c.DirectorySeconds))
		}
		rep.Rows = append(rep.Rows, []string{"create ack", fmt.Sprint(c.Nodes), fmt.Sprint(c.Creates), f2(c.PerSec), f2(c.Ack.P50), f2(c.Ack.P99), f2(c.Ack.Max), other})
	}
	for _, w := range res.Wake {
		for _, r := range []struct {
			name string
			d    dist
		}{{"wake: prompt ack", w.Ack}, {"wake: first event", w.First}, {"wake: turn_end", w.TurnEnd}} {
			rep.Rows = append(rep.Rows, []string{r.name, fmt.Sprint(w.Nodes), fmt.Sprint(r.d.N), "", f2(r.d.P50), f2(r.d.P99), f2(r.d.Max), ""})
		}
	}
	for _, l := range res.Live {
		rep.Rows = append(rep.Rows, []string{"live agents", fmt.Sprint(l.Nodes), fmt.Sprint(l.Live), f2(l.SpawnRate), "", "", "",
			fmt.Sprintf("per node %v; daemons %s KiB/agent, child PSS %s KiB; %s KiB per live agent; daemons RSS %s MiB", l.LivePerNode,
				f2(l.DaemonKiBPerAgent), f0(l.ChildPSSKiB), f0(l.KiBPerAgent), f2(float64(l.DaemonsLiveKiB)/1024))})
	}
	for _, a := range res.Attach {
		name := fmt.Sprintf("%s (n3 via %s)", a.Path, a.Via)
		rep.Rows = append(rep.Rows,
			[]string{"attach → sync: " + name, "3", fmt.Sprint(a.Attach.N), "", f2(a.Attach.P50), f2(a.Attach.P99), f2(a.Attach.Max), ""},
			[]string{"re-attach → sync: " + name, "3", fmt.Sprint(a.Reattach.N), "", f2(a.Reattach.P50), f2(a.Reattach.P99), f2(a.Reattach.Max), "detach, then attach on the same connection"},
			[]string{"re-attach, full window → sync: " + name, "3", fmt.Sprint(a.ReattachFull.N), "", f2(a.ReattachFull.P50), f2(a.ReattachFull.P99), f2(a.ReattachFull.Max), fmt.Sprintf("after the floods: a sync of %d KiB", a.FullSyncBytes>>10)},
			[]string{"prompt → first delta: " + name, "3", fmt.Sprint(a.First.N), "", f2(a.First.P50), f2(a.First.P99), f2(a.First.Max), ""},
			[]string{"paced stream: " + name, "3", fmt.Sprint(a.Paced.Deltas), f0(a.Paced.EventsPerSec), f3(a.Paced.Latency.P50), f3(a.Paced.Latency.P99), f3(a.Paced.Latency.Max),
				fmt.Sprintf("%d B deltas at %d/s; latency = receive − runtime stamp", a.Paced.Bytes, a.Paced.Rate)},
			[]string{"unpaced stream: " + name, "3", fmt.Sprint(a.Unpaced.Deltas), f0(a.Unpaced.EventsPerSec), f3(a.Unpaced.Latency.P50), f3(a.Unpaced.Latency.P99), f3(a.Unpaced.Latency.Max),
				fmt.Sprintf("%d B deltas, %s MB/s", a.Unpaced.Bytes, f2(a.Unpaced.MBPerSec))})
	}
	if len(res.Attach) == 2 {
		same, cross := res.Attach[0], res.Attach[1]
		notes = append(notes, fmt.Sprintf("cross-node against same-node: attach → sync p50 %s×, re-attach → sync p50 %s× (%s× with the floods in the window), prompt → first delta p50 %s×, paced per-delta latency p50 +%s ms (p99 +%s ms), unpaced throughput %s×",
			f2(cross.Attach.P50/same.Attach.P50), f2(cross.Reattach.P50/same.Reattach.P50), f2(cross.ReattachFull.P50/same.ReattachFull.P50), f2(cross.First.P50/same.First.P50),
			f3(cross.Paced.Latency.P50-same.Paced.Latency.P50), f3(cross.Paced.Latency.P99-same.Paced.Latency.P99),
			f2(cross.Unpaced.EventsPerSec/same.Unpaced.EventsPerSec)))
	}
	notes = append(notes, passiveRows(rep, res.Passive)...)
	scanRows(rep, res.Scan)
	notes = append(notes, "1 node is a single shardd (a cluster node needs another node's route); n nodes are n shardd processes on this machine, each with its embedded NATS JetStream server, their routes on loopback through relays; 2 nodes keep one copy of each replicated record (cluster.replicas 1), 3 nodes three")
	if phases["create"] {
		notes = append(notes, fmt.Sprintf("create: %d agent.create calls, %d in flight, round-robin over the nodes' sockets; ack = sent → acknowledged (the runtime is ready); on a cluster, then the time until every node's agent.list lists every agent on the node that created it", creates, clusterWorkers))
	}
	if phases["wake"] {
		notes = append(notes, "wake: one agent per node, attached on its node; per sample its runtime is stopped (agent.terminate, then agent.status until stopped), then `sim: say hi` is prompted: sent → acknowledged, → turn_start (the restarted runtime's first event), → turn_end; samples go round the nodes, one at a time")
	}
	if phases["live"] {
		notes = append(notes, fmt.Sprintf("live: on fresh nodes, %d agents per node created (%d in flight), attached and prompted once, then %s idle; live = runtimes running (metrics), daemon KiB/agent = the nodes' shardd RSS growth (embedded NATS included) / agents, per live agent = that + a runtime child's PSS; bound: %d per node, or MemAvailable under %d MiB", per, clusterWorkers, scaleIdleSettle, per, scaleMemFloor>>10))
	}
	if phases["attach"] {
		notes = append(notes, fmt.Sprintf("attach: on the create and wake phases' three nodes, a new agent on n3 for each path (so that both attach to the same history); same-node = a client of n3, cross-node = a client of n1 (n1 forwards the connection's commands to n3 over a NATS tunnel, and n3's events back); per path, one after the other, after one untimed attach and prompt: %d fresh connections' agent.attach sent → sync, %d re-attaches (agent.detach, then agent.attach → sync) on one connection, %d prompts (`sim: say hi`) sent → first text delta, a flood of %d stamped 64 B deltas paced at %d/s and one of %d stamped 256 B deltas unpaced, each read by the client library, then the re-attaches again with both floods in the agent's live window; per-delta latency = receive − the runtime's stamp", attachSamplesN, attachSamplesN, attachSamplesN, paced, rate, unpaced))
	}
	if phases["passive"] {
		notes = append(notes, passiveNote(passiveN))
	}
	if phases["scan"] {
		notes = append(notes, scanNote(scanSizes))
	}
	rep.Notes = append(notes, "every node runs on this one machine: the nodes share its cores and memory, so more nodes add no capacity here; the figures show what the cluster costs, not what more machines would hold")
	if len(res.Live) > 0 {
		rep.plot = func(dir string) ([]string, error) { return plotClusterLive(dir, res.Live) }
	}
	return rep, nil
}
