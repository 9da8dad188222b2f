// Package telemetry is shardd's Prometheus instrumentation: one Metrics value
// per daemon, built on its own registry (never the global one), handed to
// the gateway, the actors and the jobs subsystem as a dependency, and served
// as text at `/metrics` on the web listener.
//
// Every method is safe for concurrent use and is a no-op on a nil
// *Metrics, so components and tests that run without metrics need no
// special case. Gauges of states (agents by runtime state, runs by state)
// are maintained by their single owners (the registry actor, the jobs
// coordinator) from the transitions they already see; nothing here reads
// the store or asks an actor at scrape time.
package telemetry
