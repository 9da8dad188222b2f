//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSoakPlot: a soak CSV becomes a PNG; a CSV without the columns the
// plot needs is refused by name.
func TestSoakPlot(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "soak.csv")
	csv := "elapsed_s,pid,rss_bytes,goroutines,fds,rss_anon_bytes,rss_file_bytes,heap_inuse_bytes\n" +
		"10,100,40000000,55,96,1,1,7000000\n20,100,41000000,56,97,1,1,7100000\n30,200,39000000,50,90,1,1,6000000\n"
	if err := os.WriteFile(in, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "soak.png")
	if err := drawSoak(in, out); err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(out)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("output is not a PNG (%d bytes, %v)", len(png), err)
	}
	if err := os.WriteFile(in, []byte("elapsed_s,pid,rss_bytes\n1,2,3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := drawSoak(in, out); err == nil || !strings.Contains(err.Error(), `"goroutines"`) {
		t.Fatalf("CSV without goroutines: %v", err)
	}
}
