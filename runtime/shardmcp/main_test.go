package shardmcp_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/shard-dev/shard/internal/buildlock"
	"github.com/shard-dev/shard/internal/testhost"
)

// shardBin is the real shardd binary, built once by TestMain: the daemon
// under test runs it as every agent's runtime (`shardd agent --headless`),
// and the tests run it as the MCP server (`shardd mcp`) an MCP client
// launches.
var shardBin string

func TestMain(m *testing.M) {
	// No test, nor the daemon's git, nor the go command reads the
	// developer's home.
	removeHome, err := testhost.IsolateHome()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "shardbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		removeHome()
		os.Exit(1)
	}
	shardBin = filepath.Join(dir, "shardd")
	build := exec.Command("go", "build", "-o", shardBin, "github.com/shard-dev/shard/cmd/shardd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	unlock := buildlock.Lock() // one build at a time across test processes
	err = build.Run()
	unlock()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build shardd:", err)
		os.RemoveAll(dir)
		removeHome()
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	removeHome()
	os.Exit(code)
}
