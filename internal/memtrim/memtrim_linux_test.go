//go:build linux

package memtrim

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFileKiB is this process's resident file-backed memory (RssFile).
func rssFileKiB(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// The test binary's own executable pages leave its resident set, and the
// process goes on running (it is running this test) — the pages it still
// needs fault back in.
func TestDropExecutablePagesShrinksResidentSet(t *testing.T) {
	before := rssFileKiB(t)
	n, err := DropExecutablePages()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFileKiB(t)
	if n == 0 {
		t.Fatal("no read-only mapping of the executable was advised")
	}
	if after >= before {
		t.Fatalf("RssFile %d KiB → %d KiB; want it smaller", before, after)
	}
	t.Logf("advised %d KiB; RssFile %d KiB → %d KiB", n>>10, before, after)
}

func TestReadOnlyMappingOf(t *testing.T) {
	const exe = "/usr/bin/shardd"
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{"00400000-01420000 r-xp 00000000 fe:00 9996808   /usr/bin/shardd", true},
		{"01420000-0299c000 r--p 01020000 fe:00 9996808   /usr/bin/shardd", true},
		{"0299c000-02a1f000 rw-p 0259c000 fe:00 9996808   /usr/bin/shardd", false}, // .data: state
		{"7f0b54e7f000-7f0b54fd5000 r-xp 00026000 fe:00 326269  /usr/lib/libc.so.6", false},
		{"29a62b000000-29a62b800000 rw-p 00000000 00:00 0", false},
		{"zz-01420000 r-xp 00000000 fe:00 9996808 /usr/bin/shardd", false},
		{"01420000-00400000 r-xp 00000000 fe:00 9996808 /usr/bin/shardd", false},
	} {
		if _, _, ok := readOnlyMappingOf(c.line, exe); ok != c.ok {
			t.Errorf("%q: ok = %v, want %v", c.line, ok, c.ok)
		}
	}
}

// A read-only mapping that holds written pages (a relocated RELRO segment)
// is never dropped; clean ones are, and other files' never.
func TestCleanMappingsSkipsWrittenOnes(t *testing.T) {
	const smaps = `00400000-01420000 r-xp 00000000 fe:00 99 /usr/bin/shardd
Size:              16512 kB
Rss:                8576 kB
Private_Dirty:      1288 kB
Anonymous:             0 kB
01420000-0299c000 r--p 01020000 fe:00 99 /usr/bin/shardd
Size:              22000 kB
Private_Dirty:         8 kB
Anonymous:             8 kB
0299c000-029a0000 r--p 0259c000 fe:00 99 /usr/bin/shardd
Private_Dirty:         0 kB
Anonymous:             0 kB
029a0000-02a1f000 rw-p 025a0000 fe:00 99 /usr/bin/shardd
Private_Dirty:       396 kB
Anonymous:           396 kB
7f0b54e7f000-7f0b54fd5000 r-xp 00026000 fe:00 326269 /usr/lib/libc.so.6
Anonymous:             0 kB
`
	got, err := cleanMappingsOf(bufio.NewScanner(strings.NewReader(smaps)), "/usr/bin/shardd")
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{{0x400000, 0x1420000}, {0x299c000, 0x29a0000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("clean mappings = %#v, want %#v", got, want)
	}
}
