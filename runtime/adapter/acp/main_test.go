package acp

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(ScriptedAgentEnv) == "1" {
		runScriptedAgent() // this binary is the agent of a test (scripted_test.go)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
