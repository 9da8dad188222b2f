package logfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestFileRotatesBySizeAndKeepsBackups(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shardd.log")
	r, err := Open(path, 100, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	line := func(i int) []byte { return []byte(fmt.Sprintf("record %03d %s\n", i, strings.Repeat("x", 25))) } // 37 bytes
	for i := 0; i < 20; i++ {
		if n, err := r.Write(line(i)); err != nil || n != 37 {
			t.Fatalf("write %d: n=%d err=%v", i, n, err)
		}
	}
	// 2 records fit in 100 bytes: 20 records made 10 files, of which the
	// live one and 3 backups remain, newest first.
	want := map[string]string{
		"shardd.log":   string(line(18)) + string(line(19)),
		"shardd.log.1": string(line(16)) + string(line(17)),
		"shardd.log.2": string(line(14)) + string(line(15)),
		"shardd.log.3": string(line(12)) + string(line(13)),
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("files = %v, want %d", names, len(want))
	}
	for name, content := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != content {
			t.Errorf("%s = %q, want %q", name, b, content)
		}
		fi, _ := os.Stat(filepath.Join(dir, name))
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, want 0600", name, fi.Mode().Perm())
		}
	}
}

func TestFileRotatesAnOversizedFileAtOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shardd.log")
	if err := os.WriteFile(path, bytes.Repeat([]byte("o"), 500), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("fresh\n")); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if b, _ := os.ReadFile(path); string(b) != "fresh\n" {
		t.Fatalf("live log = %q, want only the new record", b)
	}
	if b, _ := os.ReadFile(path + ".1"); len(b) != 500 {
		t.Fatalf("backup holds %d bytes, want the old 500", len(b))
	}
	if _, err := r.Write([]byte("late\n")); err == nil {
		t.Fatal("write after Close succeeded")
	}
}

func TestFileOversizedRecordAndConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shardd.log")
	r, err := Open(path, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// A record larger than the bound still lands whole, in a file of its own.
	big := strings.Repeat("b", 200) + "\n"
	if _, err := r.Write([]byte("small\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte(big)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != big {
		t.Fatalf("live log = %q, want the big record alone", b)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				_, _ = r.Write([]byte("0123456789abcdef\n"))
			}
		}()
	}
	wg.Wait()
	for _, name := range []string{"shardd.log", "shardd.log.1", "shardd.log.2"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 64 {
			t.Errorf("%s has %d bytes, over the 64-byte bound", name, len(b))
		}
		for _, l := range strings.SplitAfter(string(b), "\n") {
			if l != "" && l != "0123456789abcdef\n" {
				t.Errorf("%s holds a torn record %q", name, l)
			}
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Errorf("a third backup exists with keep=2: %v", err)
	}
}

// Copy writes what it reads into a rotating file, each read within the
// bound, and closes both ends at EOF.
func TestCopyRotatesWhatItReads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.log")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Copy(path, 1024, 1, pr) }()
	payload := bytes.Repeat([]byte("0123456789abcde\n"), 300) // 4800 bytes
	if _, err := pw.Write(payload); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	live, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	if len(live) == 0 || len(live) > 1024 || len(old) == 0 || len(old) > 1024 {
		t.Fatalf("live %d bytes, backup %d bytes: want both in 1..1024", len(live), len(old))
	}
	if !bytes.HasSuffix(payload, append(old, live...)) {
		t.Fatal("backup then live log are not the end of what was written")
	}
	if _, err := os.Stat(path + ".2"); !os.IsNotExist(err) {
		t.Fatalf("a second backup with keep=1: %v", err)
	}
}

// Remove deletes a log and every rotated file, including ones a larger
// keep left behind.
func TestRemoveDeletesTheLogAndItsBackups(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.log")
	for _, name := range []string{"a.log", "a.log.1", "a.log.2", "a.log.3", "a.log.4", "b.log"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Remove(path, 2); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "b.log" {
		t.Fatalf("left %v, want only b.log", entries)
	}
	if err := Remove(path, 2); err != nil {
		t.Fatalf("removing again: %v", err)
	}
}

// While a log rotates, over and over, the live file and every backup that
// exists stay there for a reader: each name is replaced at once.
func TestFileNamesNeverVanishDuringRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.log")
	r, err := Open(path, 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Two rotations make both backups.
	for i := 0; i < 3; i++ {
		if _, err := r.Write([]byte("0123456789")); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	written := make(chan struct{})
	go func() {
		defer close(written)
		for i := 0; i < 2000; i++ {
			_, _ = r.Write([]byte("0123456789")) // each write rotates
		}
		close(stop)
	}()
	names := []string{path, path + ".1", path + ".2"}
	for reads := 0; ; reads++ {
		for _, name := range names {
			if _, err := os.Stat(name); err != nil {
				<-written
				t.Fatalf("after %d reads: %v", reads, err)
			}
		}
		select {
		case <-stop:
			<-written
			if entries, _ := os.ReadDir(dir); len(entries) != len(names) {
				t.Fatalf("%d files left, want %d (no temporary one)", len(entries), len(names))
			}
			return
		default:
		}
	}
}
