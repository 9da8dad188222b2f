// Package layout is where the daemon puts workspace worktrees and how it
// recognizes one of its own on disk: the path scheme under the configured
// worktree root, the token file in a worktree's git admin dir, and a scan
// of the root. It is pure file-system code with no git, no actors and no
// store, so that the workspace actor (startup reconciliation) and shardctl
// doctor (reporting) judge "looks like ours" by the same rules.
package layout

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/shard-dev/shard/internal/ids"
)

// TokenFile is the file, in a worktree's git admin dir
// (<common dir>/worktrees/<name>), holding the random token the daemon
// records with the workspace. Git deletes the admin dir with the worktree
// (remove, prune), so a worktree re-created at the same path lacks it even
// where the file system reuses the inode.
const TokenFile = "shard-workspace-token"

// WorktreePath is where a workspace's worktree goes: one directory per
// repository under root, named after the repository and a short hash of its
// main checkout root (two repositories of one name do not share it), then
// the workspace id (unique, so two workspaces never race for one path).
func WorktreePath(root, repoRoot, id string) string {
	return filepath.Join(root, RepoDir(repoRoot), id)
}

// RepoDir is the name of the directory under the root that holds the
// worktrees of the repository whose main checkout is repoRoot.
func RepoDir(repoRoot string) string {
	sum := sha256.Sum256([]byte(repoRoot))
	name := strings.Trim(nonName(filepath.Base(repoRoot)), "-")
	if name == "" {
		name = "repo"
	}
	return name + "-" + hex.EncodeToString(sum[:4])
}

func nonName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	return string(b)
}

// AdminDir is the git admin dir a linked worktree's .git file names.
func AdminDir(worktree string) (string, error) {
	b, err := os.ReadFile(filepath.Join(worktree, ".git"))
	if err != nil {
		return "", err
	}
	dir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok || dir == "" {
		return "", fmt.Errorf("%s/.git is not a linked worktree's", worktree)
	}
	if !filepath.IsAbs(dir) { // worktree.useRelativePaths
		dir = filepath.Join(worktree, dir)
	}
	return filepath.Clean(dir), nil
}

// ReadToken returns the token in worktree's admin dir ("" when there is
// none).
func ReadToken(worktree string) string {
	dir, err := AdminDir(worktree)
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(dir, TokenFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Candidate is a directory under the root that sits where the daemon puts
// worktrees (<root>/<repo dir>/<workspace id>).
type Candidate struct {
	// Path is the directory (root joined with the two names; the root as
	// given, so canonicalize the root first to compare with records).
	Path string
	// Linked is true when Path holds a .git file naming an admin dir, as a
	// linked worktree does; Token is that admin dir's token ("" if none).
	Linked bool
	Token  string
}

// Scan lists the candidates under root: every directory two levels down
// whose name is a workspace id. A missing root is no candidates. Other
// entries are ignored: the root may be shared with files of the user's.
func Scan(root string) ([]Candidate, error) {
	repos, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Candidate
	for _, r := range repos {
		if !r.IsDir() {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(root, r.Name()))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !ids.HasPrefix(e.Name(), ids.Workspace) {
				continue
			}
			c := Candidate{Path: filepath.Join(root, r.Name(), e.Name())}
			if fi, err := os.Lstat(filepath.Join(c.Path, ".git")); err == nil && fi.Mode().IsRegular() {
				if _, err := AdminDir(c.Path); err == nil {
					c.Linked = true
					c.Token = ReadToken(c.Path)
				}
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// ShortID is the tail of a ULID-based workspace id (its random part): the
// suffix of a generated branch name, so two workspaces of one repository
// differ.
func ShortID(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}
