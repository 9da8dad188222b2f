//go:build linux

package memtrim

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DropExecutablePages advises the kernel (MADV_DONTNEED) that the clean
// read-only private mappings of the running executable — its text and
// read-only data, never a mapping holding a written page (cleanMappingsOf)
// — are not needed now, and returns how many bytes of
// mappings it advised. Clean private file pages are discarded, not
// written anywhere; pages still in use fault back in from the page cache.
func DropExecutablePages() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("memtrim: %w", err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("memtrim: %w", err)
	}
	defer f.Close()
	maps, err := cleanMappingsOf(bufio.NewScanner(f), exe)
	if err != nil {
		return 0, fmt.Errorf("memtrim: read smaps: %w", err)
	}
	var total int64
	for _, m := range maps {
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); e != 0 {
			return total, fmt.Errorf("memtrim: madvise %#x-%#x: %w", m.start, m.end, e)
		}
		total += int64(m.end - m.start)
	}
	return total, nil
}

type mapping struct{ start, end uintptr }

// cleanMappingsOf reads /proc/self/smaps and returns the read-only private
// mappings of exe that hold no page of their own (Anonymous: 0 kB). A
// read-only mapping can hold written pages — a RELRO segment (.data.rel.ro
// of a PIE or externally linked build) is relocated, which copies its
// pages (they count as Anonymous), and then made read-only — and dropping
// those would bring back the file's unrelocated bytes; such a mapping is
// skipped. Private_Dirty is no guide: a file just written counts its page
// cache as dirty until it is written back.
func cleanMappingsOf(sc *bufio.Scanner, exe string) ([]mapping, error) {
	var out []mapping
	var cur mapping
	have, dirty := false, false
	flush := func() {
		if have && !dirty {
			out = append(out, cur)
		}
		have, dirty = false, false
	}
	for sc.Scan() {
		line := sc.Text()
		if start, end, ok := readOnlyMappingOf(line, exe); ok {
			flush()
			cur, have = mapping{start, end}, true
			continue
		}
		if isMappingHeader(line) {
			flush()
			continue
		}
		if !have {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != "Anonymous" {
			continue
		}
		if kb := strings.TrimSuffix(strings.TrimSpace(v), " kB"); kb != "0" {
			dirty = true
		}
	}
	flush()
	return out, sc.Err()
}

// isMappingHeader reports whether an smaps line starts a mapping
// ("start-end perms offset dev inode [path]") rather than being one of its
// "Key: value" fields.
func isMappingHeader(line string) bool {
	lo, _, ok := strings.Cut(line, " ")
	if !ok {
		return false
	}
	a, b, ok := strings.Cut(lo, "-")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(a, 16, 64)
	_, err2 := strconv.ParseUint(b, 16, 64)
	return err1 == nil && err2 == nil
}

// readOnlyMappingOf parses one line of /proc/self/maps and reports the
// range of a read-only private mapping (r-xp or r--p) of the file exe. A
// writable mapping holds state and is never reported; neither is any
// other file's, nor a line that does not parse.
func readOnlyMappingOf(line, exe string) (start, end uintptr, ok bool) {
	fields := strings.Fields(line)
	if len(fields) != 6 || fields[5] != exe {
		return 0, 0, false
	}
	if perms := fields[1]; perms != "r-xp" && perms != "r--p" {
		return 0, 0, false
	}
	lo, hi, cut := strings.Cut(fields[0], "-")
	if !cut {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return 0, 0, false
	}
	return uintptr(s), uintptr(e), true
}
