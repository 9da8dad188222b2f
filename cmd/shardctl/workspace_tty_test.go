//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shard-dev/shard/internal/testhost"
)

// openPTY opens a pseudo-terminal pair: the controlling side to read, the
// terminal side for shardctl's stdout. It skips when the system has none
// (fails in strict mode: testhost.Missing).
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testhost.Missing(t, "pseudo-terminals", err.Error())
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testhost.Missing(t, "pseudo-terminals", err.Error())
	}
	t.Cleanup(func() { pts.Close() })
	// Raw output: no "\n" → "\r\n" translation, so the bytes compare.
	if tio, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS); err == nil {
		tio.Oflag &^= unix.OPOST
		_ = unix.IoctlSetTermios(int(pts.Fd()), unix.TCSETS, tio)
	}
	return ptm, pts
}

// runOnTTY runs shardctl with stdout on a terminal and returns what the
// terminal showed.
func runOnTTY(t *testing.T, socket string, args ...string) (int, string) {
	t.Helper()
	ptm, pts := openPTY(t)
	got := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, ptm) // ends with EIO once the terminal side closes
		got <- b.String()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	root := newRoot(testClock)
	root.SetArgs(append([]string{"--socket", socket}, args...))
	root.SetOut(pts)
	var errb bytes.Buffer
	root.SetErr(&errb)
	code := execute(ctx, root)
	pts.Close()
	out := <-got
	if code != 0 {
		t.Logf("stderr: %s", errb.String())
	}
	return code, out
}

// TestWorkspaceDiffColorsOnlyOnATerminal: on a terminal the diff is
// colored (green adds, red dels, cyan hunk headers); -o json and
// --no-color never are, even there.
func TestWorkspaceDiffColorsOnlyOnATerminal(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	d := workspaceDaemon(t)
	code, out := runOnTTY(t, d.path, "ws", "diff", wsActive)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{sgrGreen + "+func a() {}" + sgrReset, sgrRed + "-func old() {}" + sgrReset, sgrCyan + "@@ -1,3 +1,4 @@ package main" + sgrReset} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal diff lacks %q:\n%q", want, out)
		}
	}
	for _, args := range [][]string{{"ws", "diff", wsActive, "-o", "json"}, {"ws", "diff", wsActive, "--no-color"}} {
		code, out := runOnTTY(t, d.path, args...)
		if code != 0 || strings.Contains(out, "\x1b[") || out == "" {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
}
