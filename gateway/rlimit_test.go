package gateway

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// emfileChildEnv marks the child process of TestAcceptSurvivesRealEMFILE.
const emfileChildEnv = "SHARD_GATEWAY_EMFILE_CHILD"

// TestAcceptSurvivesRealEMFILE runs the EMFILE scenario of
// TestAcceptRetriesTemporaryErrors for real, in a child process (it lowers
// RLIMIT_NOFILE and uses up every descriptor, which no other test may share):
// a client connects while the daemon has no descriptor left, accept fails
// with EMFILE, and once descriptors are free again the same client is served.
// The old accept loop returned at the first EMFILE and never accepted again.
func TestAcceptSurvivesRealEMFILE(t *testing.T) {
	if os.Getenv(emfileChildEnv) == "1" {
		emfileChild(t)
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptSurvivesRealEMFILE$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), emfileChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func emfileChild(t *testing.T) {
	sawEMFILE := newSignal()
	tg := startGateway(t, Config{hooks: &testHooks{acceptError: func(err error) {
		if errors.Is(err, syscall.EMFILE) {
			sawEMFILE.fire()
		}
	}}})
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		testhost.Missing(t, "/proc", err.Error())
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(len(fds) + 32)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	// Use up every descriptor, then give one back for the client's socket.
	var filler []*os.File
	release := func() {
		for _, f := range filler {
			f.Close()
		}
		filler = nil
	}
	defer release()
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("open: %v", err)
			}
			break
		}
		filler = append(filler, f)
	}
	if len(filler) == 0 {
		t.Fatal("no descriptor to fill")
	}
	filler[len(filler)-1].Close()
	filler = filler[:len(filler)-1]
	c := tg.dialRaw(t) // the last descriptor; the daemon has none to accept it with
	sawEMFILE.wait(t, "accept to fail with EMFILE")
	release()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if r := c.mustRead(t); r.Type != protocol.TypeHello {
		t.Fatalf("first record %+v, want hello", r)
	}
}
