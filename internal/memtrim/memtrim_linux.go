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

// DropExecutablePages advises the kernel (MADV_DONTNEED) that the
// read-only private mappings of the running executable — its text and
// read-only data — are not needed now, and returns how many bytes of
// mappings it advised. Clean private file pages are discarded, not
// written anywhere; pages still in use fault back in from the page cache.
func DropExecutablePages() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("memtrim: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("memtrim: %w", err)
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		start, end, ok := readOnlyMappingOf(sc.Text(), exe)
		if !ok {
			continue
		}
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_DONTNEED); e != 0 {
			return total, fmt.Errorf("memtrim: madvise %#x-%#x: %w", start, end, e)
		}
		total += int64(end - start)
	}
	if err := sc.Err(); err != nil {
		return total, fmt.Errorf("memtrim: read maps: %w", err)
	}
	return total, nil
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
