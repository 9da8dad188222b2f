package git

import (
	"errors"
	"strings"
	"testing"
)

func TestProveMerged(t *testing.T) {
	needGit(t)
	// Each setup starts on main (README committed) and leaves the branch
	// "b" and the target main in the state named; it returns the commit a
	// squash proof must name, if any.
	tests := []struct {
		name   string
		setup  func(f *fixture) (squash string)
		want   ProofKind
		reason string // substring of Proof.Reason when unproven
	}{
		{"fast-forwarded", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "x", "x\n", "b: x")
			f.git(f.root, "checkout", "-q", "main")
			f.git(f.root, "merge", "-q", "--ff-only", "b")
			return ""
		}, ProofSameCommit, ""},
		{"fast-forwarded, target moved on", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "x", "x\n", "b: x")
			f.git(f.root, "checkout", "-q", "main")
			f.git(f.root, "merge", "-q", "--ff-only", "b")
			f.commit(f.root, "m", "m\n", "main: m")
			return ""
		}, ProofAncestor, ""},
		{"merged normally", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "x", "x\n", "b: x")
			f.commit(f.root, "y", "y\n", "b: y")
			f.git(f.root, "checkout", "-q", "main")
			f.commit(f.root, "m", "m\n", "main: m")
			f.git(f.root, "merge", "-q", "--no-ff", "--no-edit", "b")
			return ""
		}, ProofAncestor, ""},
		{"branch rebased onto the target, then merged", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "x", "x\n", "b: x")
			f.git(f.root, "checkout", "-q", "main")
			f.commit(f.root, "m", "m\n", "main: m")
			f.git(f.root, "checkout", "-q", "b")
			f.git(f.root, "rebase", "-q", "main")
			f.git(f.root, "checkout", "-q", "main")
			f.git(f.root, "merge", "-q", "--no-ff", "--no-edit", "b")
			return ""
		}, ProofAncestor, ""},
		{"changes that cancel out", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "x", "x\n", "b: x")
			f.git(f.root, "revert", "--no-edit", "HEAD")
			f.git(f.root, "checkout", "-q", "main")
			f.commit(f.root, "m", "m\n", "main: m")
			return ""
		}, ProofEmptyDiff, ""},
		{"same change made on both sides", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "x", "x\n", "b: x")
			f.git(f.root, "checkout", "-q", "main")
			f.commit(f.root, "x", "x\n", "main: the same x, by another hand")
			return ""
		}, ProofSameTree, ""},
		{"rebased and merged (commits cherry-picked onto the target)", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "x", "x\n", "b: x")
			f.commit(f.root, "README", "hello\nworld\n", "b: README")
			f.git(f.root, "checkout", "-q", "main")
			f.commit(f.root, "m", "m\n", "main: m")
			f.git(f.root, "cherry-pick", "main..b")
			return ""
		}, ProofMergeAddsNothing, ""},
		{"squash-merged", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "x", "x\n", "b: x")
			f.commit(f.root, "y", "y\n", "b: y")
			f.git(f.root, "checkout", "-q", "main")
			f.commit(f.root, "m", "m\n", "main: m")
			f.git(f.root, "merge", "-q", "--squash", "b")
			f.git(f.root, "commit", "-q", "-m", "squash b")
			return ""
		}, ProofMergeAddsNothing, ""},
		{"squash-merged, then the target rewrote the same lines", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "README", "hello\ndraft\n", "b: draft")
			f.commit(f.root, "README", "hello\nfinal\n", "b: final")
			f.commit(f.root, "x", "x\n", "b: x")
			f.git(f.root, "checkout", "-q", "main")
			f.git(f.root, "merge", "-q", "--squash", "b")
			f.git(f.root, "commit", "-q", "-m", "squash b")
			sq := f.git(f.root, "rev-parse", "HEAD")
			f.commit(f.root, "README", "hello\nedited after the squash\n", "main: edit")
			f.commit(f.root, "m", "m\n", "main: m")
			return sq
		}, ProofSquashMerged, ""},
		{"unpushed commits", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "x", "x\n", "b: x")
			f.commit(f.root, "y", "y\n", "b: y")
			f.git(f.root, "checkout", "-q", "main")
			f.commit(f.root, "m", "m\n", "main: m")
			return ""
		}, Unproven, "2 commit(s) not in main"},
		{"squash-merged, then more work on the branch", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "README", "hello\nfinal\n", "b: final")
			f.git(f.root, "checkout", "-q", "main")
			f.git(f.root, "merge", "-q", "--squash", "b")
			f.git(f.root, "commit", "-q", "-m", "squash b")
			f.commit(f.root, "README", "hello\nedited\n", "main: edit")
			f.git(f.root, "checkout", "-q", "b")
			f.commit(f.root, "late", "late work\n", "b: late")
			f.git(f.root, "checkout", "-q", "main")
			return ""
		}, Unproven, "merging it would conflict"},
		{"conflicting change", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "-b", "b")
			f.commit(f.root, "README", "mine\n", "b: README")
			f.git(f.root, "checkout", "-q", "main")
			f.commit(f.root, "README", "theirs\n", "main: README")
			return ""
		}, Unproven, "merging it would conflict"},
		{"unrelated history", func(f *fixture) string {
			f.git(f.root, "checkout", "-q", "--orphan", "b")
			f.commit(f.root, "o", "o\n", "orphan")
			f.git(f.root, "checkout", "-q", "-f", "main")
			return ""
		}, Unproven, "no common ancestor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			squash := tt.setup(f)
			p, err := f.c.ProveMerged(t.Context(), f.repo(), "b", "main")
			if err != nil {
				t.Fatalf("ProveMerged: %v", err)
			}
			if p.Kind != tt.want {
				t.Fatalf("ProveMerged = %q (%+v), want %q", p.Kind, p, tt.want)
			}
			if p.Held() != (tt.want != Unproven) {
				t.Errorf("Held = %v", p.Held())
			}
			if p.BranchHead != f.git(f.root, "rev-parse", "b") || p.TargetHead != f.git(f.root, "rev-parse", "main") {
				t.Errorf("heads = %s/%s", p.BranchHead, p.TargetHead)
			}
			if squash != "" && p.SquashCommit != squash {
				t.Errorf("SquashCommit = %s, want %s", p.SquashCommit, squash)
			}
			if !strings.Contains(p.Reason, tt.reason) || (tt.want == Unproven) == (p.Reason == "") {
				t.Errorf("Reason = %q, want it to contain %q (and be set only when unproven)", p.Reason, tt.reason)
			}
		})
	}
}

func TestProveMergedSquashScanBound(t *testing.T) {
	f := newFixture(t)
	f.git(f.root, "checkout", "-q", "-b", "b")
	f.commit(f.root, "README", "hello\nfinal\n", "b: final")
	f.git(f.root, "checkout", "-q", "main")
	f.git(f.root, "merge", "-q", "--squash", "b")
	f.git(f.root, "commit", "-q", "-m", "squash b")
	f.commit(f.root, "README", "hello\nedited\n", "main: edit")
	f.commit(f.root, "m1", "1\n", "main: 1")
	f.commit(f.root, "m2", "2\n", "main: 2")

	f.c.squashScan = 3 // the squash is the 4th newest
	p, err := f.c.ProveMerged(t.Context(), f.repo(), "b", "main")
	if err != nil {
		t.Fatal(err)
	}
	if p.Held() || !p.Truncated || p.Scanned != 3 || !strings.Contains(p.Reason, "newest 3") {
		t.Errorf("bounded scan = %+v, want unproven, truncated after 3", p)
	}
	f.c.squashScan = 4
	if p, err = f.c.ProveMerged(t.Context(), f.repo(), "b", "main"); err != nil || p.Kind != ProofSquashMerged || p.Truncated || p.Scanned != 4 {
		t.Errorf("scan of 4 = %+v, %v; want squash_merged, not truncated", p, err)
	}
}

func TestProveMergedErrors(t *testing.T) {
	f := newFixture(t)
	f.git(f.root, "branch", "b")
	if _, err := f.c.ProveMerged(t.Context(), f.repo(), "nope", "main"); !errors.Is(err, ErrBranchNotFound) {
		t.Errorf("unknown branch: %v", err)
	}
	if _, err := f.c.ProveMerged(t.Context(), f.repo(), "b", "origin/nope"); !errors.Is(err, ErrRefUnknown) {
		t.Errorf("unknown target: %v", err)
	}
}
