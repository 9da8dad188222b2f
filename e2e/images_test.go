//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShardctlImages: shardctl prompt --image and attach's /image send
// image files to the real daemon and runtime (the sim names each image it
// gets in its echo), an images-only prompt included, and attach shows the
// image in the transcript of a later attach; a file over the limit or not
// an image is refused before anything is sent, and a model configured as
// text-only refuses images UNSUPPORTED.
func TestShardctlImages(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	dir := shortTemp(t)
	img := filepath.Join(dir, "shot.png")
	data := append([]byte("\x89PNG\r\n\x1a\n"), []byte("pixels of a screenshot")...)
	if err := os.WriteFile(img, data, 0o600); err != nil {
		t.Fatal(err)
	}
	named := "[image image/png, 30 bytes]"

	id := strings.TrimSpace(d.mustCtl("", "agents", "create", "--cwd", shortTemp(t)).stdout)
	r := d.mustCtl("", "prompt", id, "--image", img, "what is this?")
	if !strings.Contains(r.stdout, "You said: "+named) || !strings.Contains(r.stdout, "what is this?") {
		t.Fatalf("prompt --image stdout = %q (stderr %q)", r.stdout, r.stderr)
	}
	r = d.mustCtl("", "prompt", id, "--image", img, "--image", img)
	if strings.Count(r.stdout, named) != 2 {
		t.Fatalf("images-only prompt stdout = %q (stderr %q)", r.stdout, r.stderr)
	}

	r = d.mustCtl("/image "+img+"\n/image\nlook at it\n", "attach", id)
	out := r.stdout + r.stderr
	for _, want := range []string{"image 1 attached", "image 1: " + img, "You said: " + named + "\nlook at it"} {
		if !strings.Contains(out, want) {
			t.Fatalf("attach output lacks %q:\n%s", want, out)
		}
	}
	r = d.mustCtl("", "attach", id)
	if !strings.Contains(r.stdout+r.stderr, "you: [image image/png, 30 B, ") {
		t.Fatalf("attach transcript does not show the image:\n%s%s", r.stdout, r.stderr)
	}

	big := filepath.Join(dir, "big.png")
	if err := os.WriteFile(big, append(data, make([]byte, 5<<20)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := d.ctl("", "prompt", id, "--image", big, "x"); r.code == 0 || !strings.Contains(r.stderr, "limit 5242880 bytes") {
		t.Fatalf("over-limit image: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := d.ctl("", "prompt", id, "--image", filepath.Join(dir, "nope.png"), "x"); r.code == 0 {
		t.Fatalf("missing image file: exit 0")
	}
	txt := filepath.Join(dir, "notes.png")
	_ = os.WriteFile(txt, []byte("just text"), 0o600)
	if r := d.ctl("", "prompt", id, "--image", txt, "x"); r.code == 0 || !strings.Contains(r.stderr, "is not a PNG, JPEG, GIF or WebP image") {
		t.Fatalf("text file as image: exit %d, stderr %q", r.code, r.stderr)
	}

	blind := startDaemon(t, "--provider.text-only-models", "sim")
	id = strings.TrimSpace(blind.mustCtl("", "agents", "create", "--cwd", shortTemp(t)).stdout)
	if r := blind.ctl("", "prompt", id, "--image", img, "x"); r.code != 1 || !strings.Contains(r.stderr, "does not take images") {
		t.Fatalf("image to a text-only model: exit %d, stderr %q", r.code, r.stderr)
	}
}
