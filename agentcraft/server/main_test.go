package server

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/shard-dev/shard/internal/testhost"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testhost.WithHome(m)) }
