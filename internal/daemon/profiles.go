package daemon

import (
	"cmp"
	"strings"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/config"
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
			prof := agent.Profile{Path: d.opts.RuntimePath, Args: d.opts.RuntimeArgs, Env: env}
			if len(p.Command) > 0 {
				prof.Path, prof.Args = p.Command[0], p.Command[1:]
			}
			out[name] = prof
		default:
			args := append([]string{"agent", "--adapter", p.Kind, "--"}, p.Command...)
			out[name] = agent.Profile{Path: cmp.Or(d.opts.AdapterPath, d.opts.RuntimePath), Args: args, Env: env}
		}
	}
	return out
}
