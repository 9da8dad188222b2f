//go:build linux

package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/internal/testhost"
)

// TestDashboardCreateWithMCPServer: the new-agent form's MCP rows reach
// agent.create mcp_servers (the command line split into command and args),
// a row that cannot be a server is refused on the page, the agent's header
// names its servers (AgentInfo.mcp_servers, after a reload too), and the
// npm reference filesystem server's tool answers a prompt.
func TestDashboardCreateWithMCPServer(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", ".cache", "agents", "node_modules", ".bin", "mcp-server-filesystem")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "mcp-server-filesystem", err.Error())
	}
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.recordSent()
	p.enroll(d)
	cwd := filepath.Join(t.TempDir(), "my dir")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cwd, "note.txt"), []byte("MCP-PAGE-CONTENT"), 0o600); err != nil {
		t.Fatal(err)
	}

	p.run("an MCP row with an unclosed quote", chromedp.SendKeys(chromedp.CSS("#create-cwd"), cwd),
		chromedp.SendKeys(chromedp.CSS("#create-name"), "with-mcp"),
		chromedp.Click(chromedp.CSS("#create-mcp-add")))
	p.until("one MCP row", `document.querySelectorAll("#create-mcp .mcp-row").length === 1`)
	p.run("fill the row", chromedp.SendKeys(chromedp.CSS(".create-mcp-name"), "fs"),
		chromedp.SendKeys(chromedp.CSS(".create-mcp-target"), bin+` "`+cwd),
		chromedp.Click(chromedp.CSS("#create-go")))
	p.until("refused on the page", `document.querySelector("#create-err")?.textContent === "MCP server fs: an unclosed \""`)
	if n := len(sent(p, "agent.create")); n != 0 {
		t.Fatalf("a refused form sent agent.create (%d)", n)
	}
	// A second, blank row is skipped; closing the quote makes the first one good.
	p.run("fix the row", chromedp.SendKeys(chromedp.CSS(".create-mcp-target"), `"`), chromedp.Click(chromedp.CSS("#create-mcp-add")))
	p.until("two MCP rows", `document.querySelectorAll("#create-mcp .mcp-row").length === 2`)
	p.run("create", chromedp.Click(chromedp.CSS("#create-go")))
	p.until("agent selected", `!!document.querySelector(".agentview")?.dataset.selected && document.querySelector("#agent-status")?.textContent === "idle"`)
	got := lastSent(t, p, "agent.create")["mcp_servers"]
	want := map[string]any{"fs": map[string]any{"command": bin, "args": []any{cwd}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("agent.create mcp_servers = %v, want %v", got, want)
	}
	p.until("the header names the server", `document.querySelector("#agent-mcp")?.textContent === "MCP: fs"`)

	p.prompt(fmt.Sprintf(`sim: tool fs__read_text_file {"path":%q}`, filepath.Join(cwd, "note.txt")), "sim: say read it")
	p.until("read through the server", allowing(`[...document.querySelectorAll('.tool[data-name="fs__read_text_file"] .tool-result')].some(e => e.textContent.includes("MCP-PAGE-CONTENT"))`))

	p.run("reload", chromedp.Reload())
	p.online()
	p.until("the header names the server after a reload", `document.querySelector("#agent-mcp")?.textContent === "MCP: fs"`)
	p.screenshot("web-agent-mcp")
	p.createAgent(t.TempDir(), "plain")
	if eval[bool](p, `!!document.querySelector("#agent-mcp")`) {
		t.Fatal("an agent without MCP servers shows some")
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}
