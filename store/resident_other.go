//go:build !linux

package store

// dropResident is Linux's madvise (resident_linux.go); elsewhere the pages
// the freelist rebuild touched stay resident until the kernel reclaims them.
func (s *Store) dropResident() {}
