//go:build !linux

package memtrim

// DropExecutablePages does nothing off Linux: it reports 0 bytes advised.
func DropExecutablePages() (int64, error) { return 0, nil }
