//go:build linux

package shardtest

import "os"

// TB is the part of testing.TB the thin test helpers use; the package
// itself does not import testing, so the bench program can use the rest.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// ShortTemp is TempDir for a test: the directory is removed when t ends,
// and a failure fails t.
func ShortTemp(t TB, prefix string) string {
	t.Helper()
	dir, err := TempDir(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
