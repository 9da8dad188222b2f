package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestPromptImageFlag: --image (repeatable) sends each file as an Image
// whose MIME type is what its bytes are, whatever its name; with images
// the text may be left out; a file that is not an image or is over the
// limit is refused before anything is sent (exit 2).
func TestPromptImageFlag(t *testing.T) {
	dir := t.TempDir()
	jpeg := []byte{0xff, 0xd8, 0xff, 0xe0, 'J', 'F', 'I', 'F'}
	gif := []byte("GIF89a-tiny")
	a, b := filepath.Join(dir, "a.bin"), filepath.Join(dir, "b.png")
	_ = os.WriteFile(a, jpeg, 0o600)
	_ = os.WriteFile(b, gif, 0o600)

	d := agentScript{onPrompt: func(c *daemonConn, m protocol.Prompt) {
		c.send(turnStart("t1"))
		c.send(turnEnd("t1"))
	}}.daemon(t)
	if r := runCtl(t, nil, d.path, "", "prompt", agentA, "--image", a, "--image", b); r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	var p protocol.Prompt
	mustUnmarshal(t, d.records(protocol.TypePrompt)[0], &p)
	want := []protocol.Image{
		{Type: "image", MimeType: "image/jpeg", Data: base64.StdEncoding.EncodeToString(jpeg)},
		{Type: "image", MimeType: "image/gif", Data: base64.StdEncoding.EncodeToString(gif)},
	}
	if p.Message != "" || len(p.Images) != 2 || p.Images[0] != want[0] || p.Images[1] != want[1] {
		t.Fatalf("prompt sent = %+v", p)
	}

	txt := filepath.Join(dir, "t.png")
	_ = os.WriteFile(txt, []byte("not an image"), 0o600)
	big := filepath.Join(dir, "big.gif")
	_ = os.WriteFile(big, append(gif, make([]byte, protocol.MaxImageBytes)...), 0o600)
	for _, tc := range []struct{ path, want string }{
		{txt, "is not a PNG, JPEG, GIF or WebP image"},
		{big, "limit 5242880 bytes"},
		{filepath.Join(dir, "missing.png"), "no such file"},
	} {
		r := runCtl(t, nil, d.path, "", "prompt", agentA, "--image", tc.path, "hi")
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d stderr %q", tc.path, r.code, r.stderr)
		}
	}
	if n := len(d.records(protocol.TypePrompt)); n != 1 {
		t.Fatalf("prompts sent = %d, want 1", n)
	}
}
