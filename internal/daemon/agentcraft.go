package daemon

import (
	"context"
	"path/filepath"
	"time"

	acserver "github.com/shard-dev/shard/agentcraft/server"
	"github.com/shard-dev/shard/agentcraft/wire"
	"github.com/shard-dev/shard/config"
)

// agentCraftStartTimeout bounds the endpoint's start: its dial of the
// daemon's socket and its first read of the team's records.
const agentCraftStartTimeout = 30 * time.Second

// startAgentCraft starts the AgentCraft v1 endpoint (docs/agentcraft.md
// §10) once the gateway serves: it is a client of the daemon's own unix
// socket. A failure to start it (its port taken, say) is logged as an
// error and leaves the rest of the daemon serving: Shard's own protocol
// does not depend on it.
func (d *Daemon) startAgentCraft() {
	cfg := d.cfg
	foreman := wire.ForemanStatus{Version: d.opts.Version, Backend: wire.BackendClaude, Auth: wire.AuthUnknown,
		Message: "Shard, provider " + cfg.Provider.Name}
	if cfg.Provider.Name == "sim" {
		foreman.Backend, foreman.Auth = wire.BackendSim, wire.AuthOK
	}
	srv, err := acserver.New(acserver.Config{
		Listen:           cfg.AgentCraft.Listen,
		AllowNonLoopback: cfg.AgentCraft.AllowNonLoopback,
		Socket:           cfg.SocketPath(),
		Repos:            agentCraftRepos(cfg),
		ReposFile:        filepath.Join(cfg.Home, "agentcraft", "repos.json"),
		Foreman:          foreman,
		Logger:           d.log.With("component", "agentcraft"),
	})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), agentCraftStartTimeout)
		err = srv.Start(ctx)
		cancel()
	}
	if err != nil {
		d.log.Error("agentcraft: the endpoint did not start", "listen", cfg.AgentCraft.Listen, "err", err)
		return
	}
	d.acraft = srv
}

// agentCraftRepos are the repositories the configuration names for the
// team: team.repo, when set.
func agentCraftRepos(cfg *config.Config) []string {
	if cfg.Team.Repo == "" {
		return nil
	}
	return []string{cfg.Team.Repo}
}

// AgentCraftAddr is the address the AgentCraft v1 endpoint listens on, ""
// when it is not serving (agentcraft.enabled off, or it failed to start).
func (d *Daemon) AgentCraftAddr() string {
	if d.acraft == nil {
		return ""
	}
	return d.acraft.Addr()
}

// agentCraftURL is the endpoint's ws:// URL for daemon.json, "" when it
// is not serving.
func (d *Daemon) agentCraftURL() string {
	if addr := d.AgentCraftAddr(); addr != "" {
		return "ws://" + addr
	}
	return ""
}
