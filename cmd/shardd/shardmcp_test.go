package main

import "testing"

// TestShardMCPServer: the adapter offers `shard` as this executable's mcp
// acting as the agent on the socket, unless the profile turned it off or
// there is no daemon.
func TestShardMCPServer(t *testing.T) {
	env := map[string]string{"SHARD_SOCKET": "/h/daemon.sock", "SHARD_AGENT_ID": "agent-1"}
	name, s, ok := shardMCPServer(func(k string) string { return env[k] }, "/bin/shardd")
	if !ok || name != "shard" || s.Command != "/bin/shardd" || len(s.Args) != 1 || s.Args[0] != "mcp" ||
		s.Env["SHARD_SOCKET"] != "/h/daemon.sock" || s.Env["SHARD_AGENT_ID"] != "agent-1" || s.URL != "" {
		t.Fatalf("shardMCPServer = %q %+v %v", name, s, ok)
	}
	env[shardMCPEnv] = "off"
	if _, _, ok := shardMCPServer(func(k string) string { return env[k] }, "/bin/shardd"); ok {
		t.Fatal("offered with SHARD_ACP_SHARD_MCP off")
	}
	delete(env, shardMCPEnv)
	delete(env, "SHARD_AGENT_ID")
	if _, _, ok := shardMCPServer(func(k string) string { return env[k] }, "/bin/shardd"); ok {
		t.Fatal("offered without an agent id")
	}
}
