package refagent

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The test binary doubles as a real MCP server for the tests that
	// need one whose tools change (mcp_changed_test.go).
	if os.Getenv(growServerEnv) != "" {
		runGrowServer()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
