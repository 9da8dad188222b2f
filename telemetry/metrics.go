package telemetry

import (
	"math"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/shard-dev/shard/protocol"
)

// namespace prefixes every shardd metric.
const namespace = "shard"

// ExitReason classifies how a runtime process ended.
type ExitReason string

// The runtime exit classes of shard_runtime_exits_total.
const (
	// ExitRequested: the daemon asked it to stop (terminate, kill, idle
	// reaping, shutdown).
	ExitRequested ExitReason = "requested"
	// ExitCrash: it exited unasked after it was ready.
	ExitCrash ExitReason = "crash"
	// ExitStartFailed: it never became ready (bad command, start timeout,
	// exit during startup).
	ExitStartFailed ExitReason = "start_failed"
)

// Metrics holds every shardd collector and the registry they live in.
// Create it with New; a nil *Metrics records nothing.
type Metrics struct {
	reg *prometheus.Registry

	connections    *prometheus.GaugeVec
	attachments    prometheus.Gauge
	agents         *prometheus.GaugeVec
	runtimeStarts  prometheus.Counter
	runtimeExits   *prometheus.CounterVec
	runtimeReaps   prometheus.Counter
	eventsRelayed  prometheus.Counter
	slowConsumers  *prometheus.CounterVec
	acceptErrors   *prometheus.CounterVec
	connsRefused   *prometheus.CounterVec
	inboundPaused  *prometheus.CounterVec
	runs           *prometheus.GaugeVec
	runTransitions *prometheus.CounterVec
	queueWait      prometheus.Histogram
	runDuration    *prometheus.HistogramVec
	stopStages     *prometheus.CounterVec
	reconciled     prometheus.Counter
	commit         prometheus.Histogram
	reportDelivery prometheus.Histogram
}

// New returns a Metrics registered on a fresh registry, with the Go runtime
// and process collectors and shard_build_info{version, protocol_version}.
func New(version string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}

	m.connections = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "connections",
		Help: "Open client connections, by transport (unix, websocket)."}, []string{"transport"})
	m.attachments = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "attachments",
		Help: "Client attachments to agents (a connection attached to two agents counts twice)."})
	m.agents = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "agents_by_runtime_state",
		Help: "Durable agents by the state of their runtime process."}, []string{"runtime_state"})
	m.runtimeStarts = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "runtime_starts_total",
		Help: "Runtime generations (child processes) started."})
	m.runtimeExits = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "runtime_exits_total",
		Help: "Runtime generations ended, by reason (requested, crash, start_failed)."}, []string{"reason"})
	m.runtimeReaps = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "runtime_reaps_total",
		Help: "Idle runtimes stopped by the reaper (runtime.idle_timeout)."})
	m.eventsRelayed = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "events_relayed_total",
		Help: "Runtime events pushed to attached clients (one per event per live attachment)."})
	m.slowConsumers = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "slow_consumers_dropped_total",
		Help: "Connections closed because their outbound queue overflowed, by transport."}, []string{"transport"})
	m.acceptErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "accept_errors_total",
		Help: "Temporary accept errors (EMFILE, ENFILE, ECONNABORTED, …) the listeners backed off and retried, by transport."}, []string{"transport"})
	m.connsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "connections_refused_total",
		Help: "Connections refused at gateway.max_connections, by transport."}, []string{"transport"})
	m.inboundPaused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "inbound_paused_total",
		Help: "Times a connection's reader stopped reading because its commands in flight reached gateway.inbound_max_bytes or inbound_max_records, by transport."}, []string{"transport"})
	m.runs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "runs_by_state",
		Help: "Subagent runs known to the daemon, by state."}, []string{"state"})
	m.runTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "run_transitions_total",
		Help: "Persisted run state transitions, by previous and new state."}, []string{"from", "to"})
	m.queueWait = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "run_queue_wait_seconds",
		Help:    "Time a run waited in queued before it was admitted (queued to starting).",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)})
	m.runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "run_duration_seconds",
		Help:    "Time from a run's start to its terminal state, by terminal state.",
		Buckets: prometheus.ExponentialBuckets(0.1, 4, 10)}, []string{"state"})
	m.stopStages = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "run_stop_stage_total",
		Help: "Runs that ended after a stop, by the last escalation stage used (abort, term, kill)."}, []string{"stage"})
	m.reconciled = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "reconcile_interrupted_total",
		Help: "Runs a previous daemon left starting or active that startup reconciliation ended (interrupted or cancelled)."})
	m.commit = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "bbolt_commit_seconds",
		Help:    "Duration of write transactions on shard.db, commit and fsync included.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)})
	m.reportDelivery = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "report_delivery_seconds",
		Help:    "Time from a run's terminal transition until its parent's runtime accepted the completion report.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "Always 1; the labels name the daemon's version and protocol version."}, []string{"version", "protocol_version"})

	for _, c := range []prometheus.Collector{m.connections, m.attachments, m.agents, m.runtimeStarts, m.runtimeExits,
		m.runtimeReaps, m.eventsRelayed, m.slowConsumers, m.acceptErrors, m.connsRefused, m.inboundPaused, m.runs, m.runTransitions, m.queueWait, m.runDuration,
		m.stopStages, m.reconciled, m.commit, m.reportDelivery, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		m.reg.MustRegister(c)
	}
	build.WithLabelValues(version, protocol.Version).Set(1)

	// Label values known in advance are exported as zero, so a scrape shows
	// every series before it first moves.
	transports := []string{"unix", "websocket"}
	runtimeStates := []protocol.RuntimeState{protocol.RuntimeStopped, protocol.RuntimeStarting,
		protocol.RuntimeRunning, protocol.RuntimeStopping, protocol.RuntimeFailed}
	runStates := []protocol.RunState{protocol.RunQueued, protocol.RunStarting, protocol.RunActive,
		protocol.RunCompleted, protocol.RunFailed, protocol.RunTimedOut, protocol.RunCancelled, protocol.RunInterrupted}
	for _, t := range transports {
		m.connections.WithLabelValues(t)
		m.slowConsumers.WithLabelValues(t)
		m.acceptErrors.WithLabelValues(t)
		m.connsRefused.WithLabelValues(t)
		m.inboundPaused.WithLabelValues(t)
	}
	for _, s := range runtimeStates {
		m.agents.WithLabelValues(string(s))
	}
	for _, s := range runStates {
		m.runs.WithLabelValues(string(s))
	}
	for _, r := range []ExitReason{ExitRequested, ExitCrash, ExitStartFailed} {
		m.runtimeExits.WithLabelValues(string(r))
	}
	for _, s := range []string{"abort", "term", "kill"} {
		m.stopStages.WithLabelValues(s)
	}
	return m
}

// Registry returns the registry the collectors live in (for tests and for
// adding collectors).
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Handler serves the text exposition of the registry. A nil Metrics serves
// 404.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ConnOpened and ConnClosed track shard_connections for transport.
func (m *Metrics) ConnOpened(transport string) {
	if m != nil {
		m.connections.WithLabelValues(transport).Inc()
	}
}

// ConnClosed: see ConnOpened.
func (m *Metrics) ConnClosed(transport string) {
	if m != nil {
		m.connections.WithLabelValues(transport).Dec()
	}
}

// SlowConsumerDropped counts a connection dropped for overflowing its
// outbound queue.
func (m *Metrics) SlowConsumerDropped(transport string) {
	if m != nil {
		m.slowConsumers.WithLabelValues(transport).Inc()
	}
}

// AcceptError counts a temporary accept error a listener retried.
func (m *Metrics) AcceptError(transport string) {
	if m != nil {
		m.acceptErrors.WithLabelValues(transport).Inc()
	}
}

// ConnRefused counts a connection refused at gateway.max_connections.
func (m *Metrics) ConnRefused(transport string) {
	if m != nil {
		m.connsRefused.WithLabelValues(transport).Inc()
	}
}

// InboundPaused counts a connection's reader pausing for backpressure.
func (m *Metrics) InboundPaused(transport string) {
	if m != nil {
		m.inboundPaused.WithLabelValues(transport).Inc()
	}
}

// AttachmentsAdd moves shard_attachments by delta.
func (m *Metrics) AttachmentsAdd(delta int) {
	if m != nil && delta != 0 {
		m.attachments.Add(float64(delta))
	}
}

// AgentState moves one agent from one runtime state to another in
// shard_agents_by_runtime_state. An empty from adds a new agent; an empty
// to removes one.
func (m *Metrics) AgentState(from, to protocol.RuntimeState) {
	if m == nil || from == to {
		return
	}
	if from != "" {
		m.agents.WithLabelValues(string(from)).Dec()
	}
	if to != "" {
		m.agents.WithLabelValues(string(to)).Inc()
	}
}

// AgentsAdd moves shard_agents_by_runtime_state's count of state by n:
// the registry counts the agents it serves one by one (AgentState) and
// the stored agents it has no actor for in bulk.
func (m *Metrics) AgentsAdd(state protocol.RuntimeState, n int) {
	if m != nil && n != 0 {
		m.agents.WithLabelValues(string(state)).Add(float64(n))
	}
}

// RuntimeStarted counts a runtime generation started.
func (m *Metrics) RuntimeStarted() {
	if m != nil {
		m.runtimeStarts.Inc()
	}
}

// RuntimeExited counts a runtime generation ended, by reason.
func (m *Metrics) RuntimeExited(reason ExitReason) {
	if m != nil {
		m.runtimeExits.WithLabelValues(string(reason)).Inc()
	}
}

// RuntimeReaped counts an idle runtime stopped by the reaper.
func (m *Metrics) RuntimeReaped() {
	if m != nil {
		m.runtimeReaps.Inc()
	}
}

// EventsRelayed counts n event deliveries to attached clients.
func (m *Metrics) EventsRelayed(n int) {
	if m != nil && n > 0 {
		m.eventsRelayed.Add(float64(n))
	}
}

// RunState moves one run between states in shard_runs_by_state without
// counting a transition (a run loaded at startup or created queued). An
// empty from adds a run; an empty to removes one.
func (m *Metrics) RunState(from, to protocol.RunState) {
	if m == nil || from == to {
		return
	}
	if from != "" {
		m.runs.WithLabelValues(string(from)).Dec()
	}
	if to != "" {
		m.runs.WithLabelValues(string(to)).Inc()
	}
}

// RunTransition records a persisted transition: the state gauge moves and
// shard_run_transitions_total{from,to} counts it.
func (m *Metrics) RunTransition(from, to protocol.RunState) {
	if m == nil {
		return
	}
	m.RunState(from, to)
	m.runTransitions.WithLabelValues(string(from), string(to)).Inc()
}

// ObserveQueueWait records how long a run waited to be admitted.
func (m *Metrics) ObserveQueueWait(d time.Duration) {
	if m != nil {
		m.queueWait.Observe(nonNegative(d))
	}
}

// ObserveRunDuration records a run's start-to-end time, by terminal state.
func (m *Metrics) ObserveRunDuration(state protocol.RunState, d time.Duration) {
	if m != nil {
		m.runDuration.WithLabelValues(string(state)).Observe(nonNegative(d))
	}
}

// StopStage counts a run that ended after a stop, by the last escalation
// stage used.
func (m *Metrics) StopStage(stage string) {
	if m != nil && stage != "" {
		m.stopStages.WithLabelValues(stage).Inc()
	}
}

// ReconciledInterrupted adds the runs startup reconciliation ended.
func (m *Metrics) ReconciledInterrupted(n int) {
	if m != nil && n > 0 {
		m.reconciled.Add(float64(n))
	}
}

// ObserveCommit records one write transaction's duration; it has the shape
// of store.Options.OnCommit.
func (m *Metrics) ObserveCommit(d time.Duration) {
	if m != nil {
		m.commit.Observe(nonNegative(d))
	}
}

// ObserveReportDelivery records the time from a run's terminal transition
// until its parent accepted the completion report.
func (m *Metrics) ObserveReportDelivery(d time.Duration) {
	if m != nil {
		m.reportDelivery.Observe(nonNegative(d))
	}
}

func nonNegative(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return d.Seconds()
}

// Load is the daemon's live numbers as its gauges hold them: durable
// agents (every runtime state), agents whose runtime is starting, running
// or stopping, and subagent runs starting or active (what jobs.max_active
// caps). A cluster node publishes them in each heartbeat; reading gauges
// takes no lock any actor holds, so it never blocks a mailbox.
func (m *Metrics) Load() (agents, runtimes, runs int) {
	if m == nil {
		return 0, 0, 0
	}
	for _, s := range []protocol.RuntimeState{protocol.RuntimeStopped, protocol.RuntimeStarting,
		protocol.RuntimeRunning, protocol.RuntimeStopping, protocol.RuntimeFailed} {
		n := gaugeValue(m.agents.WithLabelValues(string(s)))
		agents += n
		if s == protocol.RuntimeStarting || s == protocol.RuntimeRunning || s == protocol.RuntimeStopping {
			runtimes += n
		}
	}
	runs = gaugeValue(m.runs.WithLabelValues(string(protocol.RunStarting))) +
		gaugeValue(m.runs.WithLabelValues(string(protocol.RunActive)))
	return agents, runtimes, runs
}

// gaugeValue is a gauge's value, rounded; never negative.
func gaugeValue(g prometheus.Gauge) int {
	var d dto.Metric
	if err := g.Write(&d); err != nil || d.Gauge == nil {
		return 0
	}
	return max(0, int(math.Round(d.Gauge.GetValue())))
}
