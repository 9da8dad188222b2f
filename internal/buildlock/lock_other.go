//go:build !unix

package buildlock

// Lock is a no-op where flock is unavailable: builds run unserialized.
func Lock() (unlock func()) { return func() {} }
