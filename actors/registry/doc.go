// Package registry is the actor at the top of the agent tree. It owns the
// set of durable Agents while the daemon runs: it creates new ones (commit
// before acknowledge), runs an agent actor for each live Agent only (an
// idle one is passivated, and served again from its manifest when it is
// addressed: passivate.go), routes per-agent and lifecycle commands to
// them, answers agent.list/agent.status from the projections its live
// children report and the store's agent indexes, and drains every runtime
// on daemon shutdown. Subagent jobs are not its own: it forwards subagent.*
// and jobs.* to the jobs coordinator, a sibling whose PID it is handed
// (AttachJobs), and never imports that package.
package registry
