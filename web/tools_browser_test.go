//go:build linux

package web_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/shard-dev/shard/internal/shardtest"
)

// TestDashboardCreateWithToolsAndSkills: the new-agent form's Tools and
// Skills fields reach agent.create. The agent's model is refused a tool
// outside the list — the page allows every permission it is asked, so only
// the limit keeps the file from being written — and its skill tool returns
// the skill's instructions.
func TestDashboardCreateWithToolsAndSkills(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	cwd := t.TempDir()
	skill := filepath.Join(cwd, ".agents", "skills", "deploy", "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(skill), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(skill, []byte("---\nname: deploy\ndescription: Ship it.\n---\nDEPLOY-STEPS: make ship\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	p.run("create a limited agent", chromedp.SendKeys(chromedp.CSS("#create-cwd"), cwd),
		chromedp.SendKeys(chromedp.CSS("#create-name"), "limited"),
		chromedp.SendKeys(chromedp.CSS("#create-tools"), "read, ls"),
		chromedp.SendKeys(chromedp.CSS("#create-skills"), "deploy"),
		chromedp.Click(chromedp.CSS("#create-go")))
	p.until("agent selected", `!!document.querySelector(".agentview")?.dataset.selected && document.querySelector("#agent-status")?.textContent === "idle"`)

	p.prompt(`sim: tool write {"path":"x.txt","content":"hi"}`, "sim: say tried")
	p.until("write refused", allowing(`[...document.querySelectorAll('.tool[data-name="write"] .tool-result')].some(e => e.textContent.includes("not available to this agent"))`))
	p.until("idle", `document.querySelector("#agent-status")?.textContent === "idle" && document.querySelectorAll(".turn-end").length === 1`)
	if _, err := os.Stat(filepath.Join(cwd, "x.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused write ran: %v", err)
	}

	p.prompt(`sim: tool skill {"name":"deploy"}`, "sim: say read it")
	p.until("skill body", `[...document.querySelectorAll('.tool[data-name="skill"] .tool-result')].some(e => e.textContent.includes("DEPLOY-STEPS: make ship"))`)
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}
