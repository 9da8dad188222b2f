package treediff

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestWorkspaceSeesARacyEdit: a tracked file rewritten with the same size
// in the same second as the index was written (an agent's edit right
// after the worktree was checked out) shows in the treediff. git finds such
// an edit only because the entry is "racily clean" — its mtime is not
// older than the index file's — so the temporary index must keep the real
// index's mtime; a copy stamped now hides the edit.
func TestWorkspaceSeesARacyEdit(t *testing.T) {
	r := newRepo(t)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	readme := filepath.Join(r.dir, "README")
	r.write("README", "hello\n")
	if err := os.Chtimes(readme, old, old); err != nil {
		t.Fatal(err)
	}
	head := r.commitAll("base")
	// The index written "in the same second" as the entry's mtime.
	if err := os.Chtimes(filepath.Join(r.dir, ".git", "index"), old, old); err != nil {
		t.Fatal(err)
	}
	// Rewritten in place: same size, same inode, same mtime.
	r.write("README", "alpha\n")
	if err := os.Chtimes(readme, old, old); err != nil {
		t.Fatal(err)
	}
	res, err := Workspace(context.Background(), r.run, r.dir, head, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(res), []string{"modified README +1 -1 hunks=1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("diff = %q, want %q", got, want)
	}
}
