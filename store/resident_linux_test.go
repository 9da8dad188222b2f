//go:build linux

package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// rssFileKiB is the process's file-backed resident memory.
func rssFileKiB(t *testing.T) int {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// Opening a large file leaves it out of the process's RSS: bbolt's freelist
// rebuild reads every page, and Open gives them back (dropResident), so
// the daemon's memory does not grow with the history it does not read.
func TestOpenLeavesTheFileOutOfRSS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	// 32 MiB of small records, as a long history is: many leaf pages.
	val := bytes.Repeat([]byte("x"), 1000)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketJobs))
		for i := range 32 * 1024 {
			if err := b.Put([]byte(fmt.Sprintf("job-%08d", i)), val); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := rssFileKiB(t)
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if grew := rssFileKiB(t) - before; grew > 8*1024 {
		t.Fatalf("Open left %d KiB of the file resident; want under 8 MiB of a 32 MiB file", grew)
	}
}
