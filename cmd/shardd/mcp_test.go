package main

import (
	"testing"
)

func TestDecodeMCPServers(t *testing.T) {
	got, err := decodeMCPServers(`{"web":{"url":"http://h/mcp"},"fs":{"command":"srv","args":["/w"],"env":{"K":"v"}}}`)
	if err != nil || len(got) != 2 || got[0].Name != "fs" || got[0].Command != "srv" || got[0].Env["K"] != "v" || got[1].Name != "web" || got[1].URL != "http://h/mcp" {
		t.Fatalf("decodeMCPServers = %+v, %v", got, err)
	}
	if got, err := decodeMCPServers(""); got != nil || err != nil {
		t.Fatalf(`decodeMCPServers("") = %+v, %v`, got, err)
	}
	if _, err := decodeMCPServers(`[1]`); err == nil {
		t.Fatal("a list decoded")
	}
}

// FuzzDecodeMCPServers: any SHARD_MCP_SERVERS value decodes or fails,
// never panics, and every server decoded has its name.
func FuzzDecodeMCPServers(f *testing.F) {
	f.Add(`{"fs":{"command":"srv","args":["/w"],"env":{"K":"v"}},"web":{"url":"http://h","headers":{"A":"b"}}}`)
	f.Add(`{}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, v string) {
		out, err := decodeMCPServers(v)
		if err != nil {
			return
		}
		for i, s := range out {
			if i > 0 && out[i-1].Name >= s.Name {
				t.Fatalf("not sorted by name: %+v", out)
			}
		}
	})
}
