package daemon

import (
	"cmp"
	"errors"
	"strings"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/refagent"
	"github.com/shard-dev/shard/runtime/skills"
)

// profiles turns the config's runtime profiles into command lines (issue
// 13): a shard profile runs its command or the reference runtime; an acp or
// pi profile runs the adapter (`agent --adapter <kind> -- <command…>`),
// which starts the third-party agent itself. Only here is the kind known;
// the agent actors see a command line and environment.
func (d *Daemon) profiles() map[string]agent.Profile {
	out := make(map[string]agent.Profile, len(d.cfg.Runtimes))
	for name, p := range d.cfg.Runtimes {
		env := p.EnvList()
		if len(p.Models) > 0 {
			env = append(env, "SHARD_ADAPTER_MODELS="+strings.Join(p.Models, ","))
		}
		switch p.Kind {
		case config.KindShard:
			prof := agent.Profile{Path: d.opts.RuntimePath, Args: d.opts.RuntimeArgs, Env: env,
				Tools: refagent.ToolNames(), Skills: d.checkSkills}
			// The profile's MCP servers (the agent's own join them at
			// launch, lifecycle.go).
			prof.MCPServers, prof.MCP = p.MCPServers, true
			if len(p.Command) > 0 {
				prof.Path, prof.Args = p.Command[0], p.Command[1:]
			}
			out[name] = prof
		default:
			args := append([]string{"agent", "--adapter", p.Kind, "--"}, p.Command...)
			prof := agent.Profile{Path: cmp.Or(d.opts.AdapterPath, d.opts.RuntimePath), Args: args, Env: env}
			// An ACP agent takes MCP servers in session/new (the adapter
			// reads them from SHARD_MCP_SERVERS, as the reference runtime
			// does); pi has no MCP client.
			if config.ConnectsMCP(p.Kind) {
				prof.MCPServers, prof.MCP = p.MCPServers, true
			}
			out[name] = prof
		}
	}
	return out
}

// checkSkills is the reference runtime's skill check (agent.Profile.Skills):
// each name must be a skill in the agent's project or in the Shard home,
// where the runtime looks (runtime/skills). A missing one is NOT_FOUND,
// one that cannot be used INVALID_REQUEST (docs/protocol.md §10.1).
func (d *Daemon) checkSkills(cwd string, names []string) error {
	err := skills.Check(skills.Dirs(cwd, d.cfg.Home), names)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, skills.ErrNotFound):
		return protocol.Errorf(protocol.CodeNotFound, `field "skills": %v (looked in %s of the cwd and in $SHARD_HOME/skills)`,
			err, strings.Join(skills.ProjectDirs, ", "))
	default:
		return protocol.Errorf(protocol.CodeInvalidRequest, `field "skills": %v`, err)
	}
}
