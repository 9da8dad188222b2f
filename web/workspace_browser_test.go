//go:build linux

package web_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// gitIn runs git in dir with a fixed identity and no user or system config.
func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = shardtest.CleanEnv("GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestDashboardWorkspaces: a workspace created from the CLI shows in the
// page (workspace_created), its diff renders unified and side by side,
// and a refused retire shows the refusal's kind.
func TestDashboardWorkspaces(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)

	_, cr := newWorkspace(t, d, "feature")
	if err := os.WriteFile(filepath.Join(cr.Workspace.Cwd, "feature.txt"), []byte("a new line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A Go file too: its diff lines are drawn with syntax tokens.
	if err := os.WriteFile(filepath.Join(cr.Workspace.Cwd, "main.go"), []byte("package main // entry\n\nfunc main() { println(\"hi\", 42) }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, cr.Workspace.Cwd, "add", "feature.txt", "main.go")
	gitIn(t, cr.Workspace.Cwd, "commit", "-q", "-m", "feature")

	sel := `document.querySelector('[data-workspace="` + cr.Workspace.WorkspaceID + `"]')`
	p.until("workspace listed", "!!"+sel)
	p.run("diff", chromedp.Click(chromedp.CSS(`[data-workspace="`+cr.Workspace.WorkspaceID+`"] .wbtns button`)))
	p.until("unified diff", `[...document.querySelectorAll("#ws-diff .dl.add")].some(e => e.textContent.includes("a new line")) && document.querySelector("#ws-diff").textContent.includes("feature.txt")`)
	p.until("syntax tokens in the Go file's diff", `(() => {
		const f = [...document.querySelectorAll("#ws-diff .dfile")].find(e => e.dataset.lang === "go");
		if (!f) return false;
		const of = (c) => [...f.querySelectorAll(".tk-" + c)].map(e => e.textContent.trim());
		return of("kw").includes("func") && of("kw").includes("package") && of("str").includes('"hi"') && of("num").includes("42") && of("com").includes("// entry")
			&& ![...document.querySelectorAll("#ws-diff .dfile")].find(e => e.textContent.includes("feature.txt")).querySelector("[class^=tk-]");
	})()`)
	p.clickWhen("side by side", `[...document.querySelectorAll("#ws-diff .wsdiff-head button")].find(b => b.textContent === "Side by side")`)
	p.until("split table", `[...document.querySelectorAll("#ws-diff table.split tr.add td.n")].some(e => e.textContent === "a new line")`)
	p.screenshot("web-workspace-diff")

	// The branch is not merged: delete_if_merged is refused (or the live
	// agent is); the page names the refusal's kind.
	p.clickWhen("retire", sel+`?.querySelector(".wbtns button:nth-child(4)")`)
	p.until("refusal shown", `/retire: CONFLICT .*\((confirmation_required|live|busy)\)/.test(document.querySelector("#notice").textContent)`)
}

// newWorkspace makes a real repository (main, one commit of README) with
// an identity of its own, as a user's repository has (the daemon's merge
// commits need one and never invent one), and a workspace of it labelled
// label through shardctl; it returns the repository's root and the
// create's answer.
func newWorkspace(t *testing.T, d *daemon, label string) (string, protocol.WorkspaceCreateData) {
	t.Helper()
	testhost.Tool(t, "git")
	repo, err := filepath.EvalSymlinks(shardtest.ShortTemp(t, "wr"))
	if err != nil {
		t.Fatal(err)
	}
	gitIn(t, repo, "init", "-q", "-b", "main")
	gitIn(t, repo, "config", "user.name", "t")
	gitIn(t, repo, "config", "user.email", "t@example.test")
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, repo, "add", "README")
	gitIn(t, repo, "commit", "-q", "-m", "initial")
	var cr protocol.WorkspaceCreateData
	if err := json.Unmarshal([]byte(d.ctl("ws", "create", "--cwd", repo, "--label", label, "-o", "json")), &cr); err != nil {
		t.Fatal(err)
	}
	return repo, cr
}
