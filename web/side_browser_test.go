//go:build linux

package web_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/shard-dev/shard/internal/shardtest"
)

// allowing is a wait expression that also allows any open permission
// request of the page (the parent's own subagent call asks first).
func allowing(expr string) string {
	return `(document.querySelector(".dialog.perm button.i-allow")?.click(), ` + expr + `)`
}

// TestDashboardStopAndRelaunchRun: a subagent run that hangs is stopped
// from the jobs panel (its state follows live to cancelled), then
// relaunched from the panel with a new task, and the new run completes.
func TestDashboardStopAndRelaunchRun(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	p.createAgent(t.TempDir(), "lead")
	p.prompt("sim: subagent helper sim: sleep 600000")
	p.until("run running", allowing(`[...document.querySelectorAll("#jobs .run .state")].some(e => e.textContent === "active" || e.textContent === "running")`))
	p.clickWhen("stop", `[...document.querySelectorAll("#jobs .run button")].find(b => b.textContent === "Stop")`)
	p.until("stop answered", `/^stop: done/.test(document.querySelector("#notice").textContent)`)
	p.until("run cancelled", `[...document.querySelectorAll("#jobs .run .state")].some(e => e.textContent === "cancelled" || e.textContent === "interrupted")`)
	p.screenshot("web-run-stopped")

	p.clickWhen("open relaunch", `[...document.querySelectorAll("#jobs .run button")].find(b => b.textContent === "Relaunch…")`)
	p.run("relaunch task", chromedp.SendKeys(chromedp.CSS(`#jobs .run form input`), "sim: say relaunched"),
		chromedp.Click(chromedp.CSS(`#jobs .run form button[type=submit]`)))
	p.until("relaunch answered", `/^relaunch: /.test(document.querySelector("#notice").textContent)`)
	if n := eval[string](p, `document.querySelector("#notice").textContent`); n != "relaunch: done" {
		t.Fatalf("relaunch: the page says %q", n)
	}
	p.until("relaunched run completed", allowing(`[...document.querySelectorAll("#jobs .run .state")].some(e => e.textContent === "completed")`))
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardWorkspaceMerge: a workspace's committed branch is merged
// from the page; the integration branch in the real repository has it.
func TestDashboardWorkspaceMerge(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)

	repo, cr := newWorkspace(t, d, "merged")
	if err := os.WriteFile(filepath.Join(cr.Workspace.Cwd, "merged.txt"), []byte("merged line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, cr.Workspace.Cwd, "add", "merged.txt")
	gitIn(t, cr.Workspace.Cwd, "commit", "-q", "-m", "the merged feature")

	sel := `document.querySelector('[data-workspace="` + cr.Workspace.WorkspaceID + `"]')`
	p.until("workspace listed", "!!"+sel)
	p.clickWhen("merge", `[...`+sel+`.querySelectorAll(".wbtns button")].find(b => b.textContent === "Merge")`)
	p.until("merge answered", `/^merge: done/.test(document.querySelector("#notice").textContent)`)
	out, err := exec.Command("git", "-C", repo, "log", "--format=%s", "main").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "the merged feature") {
		t.Fatalf("main after the merge: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(repo, "merged.txt")); err != nil || string(b) != "merged line\n" {
		t.Fatalf("merged.txt in the repository: %q, %v", b, err)
	}
}
