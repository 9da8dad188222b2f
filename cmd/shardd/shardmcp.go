package main

import (
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/shardmcp"
)

// shardMCPEnv turns off the `shard` MCP server the ACP adapter offers the
// agent it hosts: a profile's env `SHARD_ACP_SHARD_MCP: off`.
const shardMCPEnv = "SHARD_ACP_SHARD_MCP"

// shardMCPServer is the MCP server the ACP adapter offers the agent it
// hosts so that it can use Shard's subagent and team tools
// (runtime/shardmcp): this executable, exe, run as `mcp`, acting as the
// agent SHARD_AGENT_ID on SHARD_SOCKET, both passed in its env (an agent
// may launch MCP servers with an environment of its own). It is named
// shardmcp.ServerName ("shard"), so Claude Code calls its tools
// mcp__shard__<tool>. ok is false when the profile turned it off or the
// adapter runs without a daemon (by hand).
func shardMCPServer(getenv func(string) string, exe string) (name string, s protocol.MCPServer, ok bool) {
	socket, agent := getenv("SHARD_SOCKET"), getenv("SHARD_AGENT_ID")
	if getenv(shardMCPEnv) == "off" || socket == "" || agent == "" || exe == "" {
		return "", protocol.MCPServer{}, false
	}
	return shardmcp.ServerName, protocol.MCPServer{Command: exe, Args: []string{"mcp"},
		Env: map[string]string{"SHARD_SOCKET": socket, "SHARD_AGENT_ID": agent}}, true
}
