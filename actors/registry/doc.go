// Package registry is the actor at the top of the agent tree. It owns the
// set of durable Agents while the daemon runs: it loads manifests at start,
// creates new ones (commit before acknowledge), spawns one agent actor per
// Agent, routes per-agent and lifecycle commands to them, answers
// agent.list/agent.status from the projections its children report, and
// drains every runtime on daemon shutdown. Subagent jobs are not its own:
// it forwards subagent.* and jobs.* to the jobs coordinator, a sibling whose
// PID it is handed (AttachJobs), and never imports that package.
package registry
