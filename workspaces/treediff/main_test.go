package treediff

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain isolates every git the tests run from the machine's git
// configuration (a global core.quotePath or treediff.noprefix would change the
// bytes under test) and fixes the commit identity, then checks for leaks.
func TestMain(m *testing.M) {
	for k, v := range map[string]string{
		"GIT_CONFIG_GLOBAL":   os.DevNull,
		"GIT_CONFIG_NOSYSTEM": "1",
		"GIT_AUTHOR_NAME":     "t",
		"GIT_AUTHOR_EMAIL":    "t@example.com",
		"GIT_COMMITTER_NAME":  "t",
		"GIT_COMMITTER_EMAIL": "t@example.com",
	} {
		os.Setenv(k, v)
	}
	goleak.VerifyTestMain(m)
}
