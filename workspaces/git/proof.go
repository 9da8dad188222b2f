package git

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ProofKind is which merge proof held. The values are stable strings for
// records and logs.
type ProofKind string

// The proofs, in the order ProveMerged tries them (cheapest first).
const (
	// Unproven: no proof held; Proof.Reason says why.
	Unproven ProofKind = ""
	// ProofSameCommit: the branch head is the target head.
	ProofSameCommit ProofKind = "same_commit"
	// ProofAncestor: the branch head is an ancestor of the target (merged
	// normally or fast-forwarded).
	ProofAncestor ProofKind = "ancestor"
	// ProofEmptyDiff: `git diff target...branch` is empty: the branch's
	// changes since the merge-base cancel out.
	ProofEmptyDiff ProofKind = "empty_three_dot_diff"
	// ProofSameTree: the branch head and the target have identical trees.
	ProofSameTree ProofKind = "identical_tree"
	// ProofMergeAddsNothing: `git merge-tree --write-tree target branch` is
	// clean and yields the target's tree (rebased-and-merged, or the same
	// changes landed another way).
	ProofMergeAddsNothing ProofKind = "merge_adds_nothing"
	// ProofSquashMerged: the patch-id of the branch's combined change since
	// the merge-base equals the patch-id of one target commit since it.
	ProofSquashMerged ProofKind = "squash_merged"
)

// MaxSquashScan bounds the target commits (since the merge-base, newest
// first, merges excluded) whose patch-ids ProveMerged compares; a squash
// older than that is reported unproven with Truncated set.
const MaxSquashScan = 1000

// Proof is the outcome of ProveMerged.
type Proof struct {
	// Kind is the proof that held, or Unproven.
	Kind ProofKind
	// Reason explains Unproven (the user sees it in the confirmation
	// refusal), e.g. "branch has 2 commit(s) not in main".
	Reason string
	// Branch and Target are the names proven about; BranchHead and
	// TargetHead the commits they pointed at. DeleteBranch deletes only if
	// the branch is still at BranchHead.
	Branch, Target         string
	BranchHead, TargetHead string
	// SquashCommit is the target commit whose patch-id matched.
	SquashCommit string
	// Scanned is how many target commits the squash proof compared;
	// Truncated is true when more existed than MaxSquashScan.
	Scanned   int
	Truncated bool
}

// Held reports whether some proof held.
func (p Proof) Held() bool { return p.Kind != Unproven }

// diffFlags are shared by every diff fed to patch-id, so both sides of the
// comparison are computed the same way whatever the user's config says.
var diffFlags = []string{"--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--full-index", "--binary"}

// ProveMerged proves that branch adds nothing to target, trying cheapest
// first: same commit, ancestor, empty three-dot diff, identical trees,
// simulated merge (git >= 2.38; skipped on older git), squash patch-id.
// An unproven result is not an error: the error is reserved for an unknown
// branch (ErrBranchNotFound), an unknown target (ErrRefUnknown) and git
// failures such as a timeout. target may be any commit-ish (a branch name,
// "origin/main").
func (c *Client) ProveMerged(ctx context.Context, repo Repo, branch, target string) (Proof, error) {
	p := Proof{Branch: branch, Target: target}
	var err error
	if p.BranchHead, err = c.BranchHead(ctx, repo, branch); err != nil {
		return p, fmt.Errorf("prove merged: %w", err)
	}
	if p.TargetHead, err = c.ResolveCommit(ctx, repo.Root, target); err != nil {
		return p, fmt.Errorf("prove merged: target: %w", err)
	}
	b, t, dir := p.BranchHead, p.TargetHead, repo.Root
	held := func(k ProofKind) (Proof, error) { p.Kind = k; return p, nil }

	if b == t {
		return held(ProofSameCommit)
	}
	if _, err := c.read(ctx, dir, "merge-base", "--is-ancestor", b, t); err == nil {
		return held(ProofAncestor)
	} else if exitCode(err) != 1 {
		return p, fmt.Errorf("prove merged: %w", err)
	}
	mbOut, err := c.read(ctx, dir, "merge-base", t, b)
	if err != nil {
		if exitCode(err) == 1 {
			p.Reason = "no common ancestor with " + target
			return p, nil
		}
		return p, fmt.Errorf("prove merged: %w", err)
	}
	mb := line(mbOut)
	if _, err := c.read(ctx, dir, "diff", "--quiet", "--no-ext-diff", "--no-textconv", mb, b); err == nil {
		return held(ProofEmptyDiff)
	} else if exitCode(err) != 1 {
		return p, fmt.Errorf("prove merged: %w", err)
	}
	bt, err := c.tree(ctx, dir, b)
	if err != nil {
		return p, fmt.Errorf("prove merged: %w", err)
	}
	tt, err := c.tree(ctx, dir, t)
	if err != nil {
		return p, fmt.Errorf("prove merged: %w", err)
	}
	if bt == tt {
		return held(ProofSameTree)
	}
	mergeNote := ""
	out, err := c.read(ctx, dir, "merge-tree", "--write-tree", "--no-messages", t, b)
	switch code := exitCode(err); {
	case err == nil:
		if line(out) == tt {
			return held(ProofMergeAddsNothing)
		}
		mergeNote = "merging it would change " + target
	case code == 1:
		mergeNote = "merging it would conflict"
	case code == 129 || code == 128 && strings.Contains(stderrOf(err), "write-tree"):
		mergeNote = "git too old for merge-tree --write-tree"
	default:
		return p, fmt.Errorf("prove merged: %w", err)
	}
	if ok, err := c.squashed(ctx, dir, mb, b, t, &p); err != nil {
		if errors.Is(err, ErrOutputTooLarge) {
			p.Reason = mergeNote + "; change too large to compare patch-ids"
			return p, nil
		}
		return p, fmt.Errorf("prove merged: %w", err)
	} else if ok {
		return held(ProofSquashMerged)
	}
	n, err := c.count(ctx, dir, t+".."+b)
	if err != nil {
		return p, fmt.Errorf("prove merged: %w", err)
	}
	p.Reason = fmt.Sprintf("branch has %d commit(s) not in %s; %s; no squash commit matches", n, target, mergeNote)
	if p.Truncated {
		p.Reason += fmt.Sprintf(" among the newest %d", p.Scanned)
	}
	return p, nil
}

func stderrOf(err error) string {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.Stderr
	}
	return ""
}

// count is `git rev-list --count args...`.
func (c *Client) count(ctx context.Context, dir string, args ...string) (int, error) {
	out, err := c.read(ctx, dir, append([]string{"rev-list", "--count"}, args...)...)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(line(out))
}

// squashed compares the patch-id of `git diff mb b` with the patch-ids of
// the newest MaxSquashScan non-merge commits in mb..t. Two exec calls per
// side (diff, then patch-id fed from Go): no shell pipeline.
func (c *Client) squashed(ctx context.Context, dir, mb, b, t string, p *Proof) (bool, error) {
	diff, err := c.read(ctx, dir, append(append([]string{"diff"}, diffFlags...), mb, b)...)
	if err != nil {
		return false, err
	}
	want, err := c.patchIDs(ctx, dir, diff)
	if err != nil || len(want) == 0 {
		return false, err
	}
	total, err := c.count(ctx, dir, "--no-merges", mb+".."+t)
	if err != nil {
		return false, err
	}
	limit := MaxSquashScan
	if c.squashScan > 0 {
		limit = c.squashScan
	}
	args := append(append([]string{"log", "-p", "--no-merges", "--no-decorate", "--no-show-signature",
		"--format=medium", "--max-count=" + strconv.Itoa(limit)}, diffFlags...), mb+".."+t)
	logOut, err := c.read(ctx, dir, args...)
	if err != nil {
		return false, err
	}
	got, err := c.patchIDs(ctx, dir, logOut)
	if err != nil {
		return false, err
	}
	p.Scanned = len(got)
	p.Truncated = total > limit
	for _, g := range got {
		if g.id == want[0].id {
			p.SquashCommit = g.commit
			return true, nil
		}
	}
	return false, nil
}

type patchID struct{ id, commit string }

// patchIDs runs `git patch-id --stable` over a diff or `log -p` output.
func (c *Client) patchIDs(ctx context.Context, dir string, patch []byte) ([]patchID, error) {
	if len(patch) == 0 {
		return nil, nil
	}
	out, err := c.r.Run(ctx, Invocation{Dir: dir, Args: []string{"patch-id", "--stable"}, Stdin: patch, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	var ids []patchID
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, commit, _ := strings.Cut(strings.TrimSpace(l), " ")
		if id != "" {
			ids = append(ids, patchID{id: id, commit: commit})
		}
	}
	return ids, nil
}
