//go:build linux

package web_test

import (
	"context"
	"encoding/json"
	"fmt"
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

// newRepo makes a real repository (main, one commit of README) with an
// identity of its own, as a user's repository has (the daemon's merge
// commits need one and never invent one), and returns its root.
func newRepo(t *testing.T) string {
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
	return repo
}

// newWorkspace makes a repository (newRepo) and a workspace of it labelled
// label through shardctl; it returns the repository's root and the
// create's answer.
func newWorkspace(t *testing.T, d *daemon, label string) (string, protocol.WorkspaceCreateData) {
	t.Helper()
	repo := newRepo(t)
	var cr protocol.WorkspaceCreateData
	if err := json.Unmarshal([]byte(d.ctl("ws", "create", "--cwd", repo, "--label", label, "-o", "json")), &cr); err != nil {
		t.Fatal(err)
	}
	return repo, cr
}

// TestDashboardWorkspaceCreateAttachRetire: a workspace is created from
// the page's new-agent form (isolation "workspace", a branch of the
// person's choosing: workspace.create), which makes the real worktree and
// branch and selects the agent working in it; another agent is attached to
// it from the workspaces panel (workspace.attach). With a commit on the
// branch that the integration target lacks, retiring is refused
// confirmation_required; the page shows why and offers the confirmed
// retry, which retires the workspace and deletes the branch.
func TestDashboardWorkspaceCreateAttachRetire(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	home := p.createAgent(t.TempDir(), "home")
	repo := newRepo(t)

	p.run("isolation workspace", chromedp.SetValue(chromedp.CSS("#create-isolation"), "workspace"), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`document.querySelector("#create-isolation").dispatchEvent(new Event("change", {bubbles: true}))`)(ctx, tg)
		return err
	}))
	p.until("workspace fields", `!!document.querySelector("#create-branch")`)
	// The form keeps the last directory; this one is the repository.
	p.until("directory cleared", `(el => (el.value = "", el.dispatchEvent(new Event("input", {bubbles: true})), true))(document.querySelector("#create-cwd"))`)
	p.run("create workspace", chromedp.SendKeys(chromedp.CSS("#create-cwd"), repo), chromedp.SendKeys(chromedp.CSS("#create-branch"), "feat-page"),
		chromedp.SendKeys(chromedp.CSS("#create-name"), "ws-one"), chromedp.Click(chromedp.CSS("#create-go")))
	p.until("workspace created", `/^workspace: created \S+/.test(document.querySelector("#notice").textContent)`)
	p.until("its agent selected, idle", fmt.Sprintf(`(s => !!s && s !== %q)(document.querySelector(".agentview")?.dataset.selected) && document.querySelector("#agent-status")?.textContent === "idle"`, home))
	first := eval[string](p, `document.querySelector(".agentview").dataset.selected`)

	var list protocol.WorkspaceListData
	if err := json.Unmarshal([]byte(d.ctl("ws", "ls", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Workspaces) != 1 || list.Workspaces[0].Branch != "feat-page" {
		t.Fatalf("workspaces after the page's create: %+v", list.Workspaces)
	}
	w := list.Workspaces[0]
	out, err := exec.Command("git", "-C", repo, "worktree", "list", "--porcelain").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "worktree "+w.Cwd+"\n") || !strings.Contains(string(out), "branch refs/heads/feat-page") {
		t.Fatalf("git worktree list: %s (workspace cwd %s)", out, w.Cwd)
	}
	sel := `document.querySelector('[data-workspace="` + w.WorkspaceID + `"]')`
	p.until("listed with its branch", sel+`?.textContent.includes("feat-page")`)
	p.until("the agent works in the worktree", fmt.Sprintf(`document.querySelector('[data-agent=%q] .meta')?.textContent.includes(%q)`, first, w.Cwd))

	// Attach a second agent from the panel.
	p.clickWhen("open attach", sel+`?.querySelector(".ws-attach")`)
	p.run("attach", chromedp.SendKeys(chromedp.CSS(`[data-workspace="`+w.WorkspaceID+`"] .ws-attach-form input`), "ws-two"),
		chromedp.Click(chromedp.CSS(`[data-workspace="`+w.WorkspaceID+`"] .ws-attach-form button[type=submit]`)))
	p.until("attach answered", `/^attach: /.test(document.querySelector("#notice").textContent)`)
	if n := eval[string](p, `document.querySelector("#notice").textContent`); n != "attach: done" {
		t.Fatalf("attach: the page says %q", n)
	}
	p.until("the second agent selected", fmt.Sprintf(`(s => !!s && s !== %q && s !== %q)(document.querySelector(".agentview")?.dataset.selected) && document.querySelector("#agent-status")?.textContent === "idle"`, home, first))
	second := eval[string](p, `document.querySelector(".agentview").dataset.selected`)
	p.until("two agents in the workspace", sel+`?.textContent.includes("2 agent(s)")`)
	p.until("the second agent works in the worktree", fmt.Sprintf(`document.querySelector('[data-agent=%q] .meta')?.textContent.includes(%q)`, second, w.Cwd))

	// A commit main lacks; nobody attached and nothing running.
	if err := os.WriteFile(filepath.Join(w.Cwd, "page.txt"), []byte("from the page's workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, w.Cwd, "add", "page.txt")
	gitIn(t, w.Cwd, "commit", "-q", "-m", "unmerged work")
	p.clickWhen("select home", fmt.Sprintf(`document.querySelector('[data-agent=%q] .pick')`, home))
	d.ctl("agents", "terminate", first)
	d.ctl("agents", "terminate", second)
	for _, id := range []string{first, second} {
		p.until("stopped "+id, fmt.Sprintf(`document.querySelector('[data-agent=%q] .meta')?.textContent.includes("stopped") && document.querySelector('[data-agent=%q] .clients')?.textContent === "0 attached"`, id, id))
	}

	p.clickWhen("retire", `[...`+sel+`.querySelectorAll(".wbtns button")].find(b => b.textContent === "Retire")`)
	p.until("refusal shown", sel+`?.querySelector(".ws-refusal")?.dataset.kind === "confirmation_required" && !!`+sel+`.querySelector(".ws-confirm")`)
	if why := eval[string](p, sel+`.querySelector(".ws-refusal").textContent`); !strings.Contains(why, "confirmation_required") || len(why) < 40 {
		t.Fatalf("the refusal shown: %q", why)
	}
	p.screenshot("web-workspace-confirm")
	if out, err := exec.Command("git", "-C", repo, "branch", "--list", "feat-page").Output(); err != nil || !strings.Contains(string(out), "feat-page") {
		t.Fatalf("the refused retire changed the branch: %q, %v", out, err)
	}
	p.clickWhen("confirmed retry", sel+`?.querySelector(".ws-confirm")`)
	p.until("retired", `document.querySelector("#notice").textContent === "retire: done" && !`+sel)
	if out, err := exec.Command("git", "-C", repo, "branch", "--list", "feat-page").Output(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("branch after the confirmed retire: %q, %v", out, err)
	}
	if _, err := os.Stat(w.Cwd); !os.IsNotExist(err) {
		t.Fatalf("worktree after the retire: %v", err)
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}
