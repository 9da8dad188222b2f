package agent_test

import (
	"os"
	"testing"

	"github.com/shard-dev/shard/internal/actortest"
)

// shardd is the runtime binary the actor-level tests run, built once by
// TestMain; the tests only read it.
var shardd string

// TestMain builds the runtime and checks for leaked goroutines once the
// tests passed (see actortest.Main).
func TestMain(m *testing.M) { os.Exit(actortest.Main(m, &shardd)) }
