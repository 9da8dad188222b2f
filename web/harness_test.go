//go:build linux

package web_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/internal/testhost"
)

// Deadlines of the browser tests. They bound waits that normally end in
// milliseconds or a few seconds (a reconnect waits out the backoff); the
// machine may be busy.
const (
	readyTimeout = 30 * time.Second
	stepTimeout  = 60 * time.Second
)

// binaries builds shardd and shardctl once per test binary, on the first
// browser test that needs them (the handler tests need neither).
type binaries struct {
	once             sync.Once
	dir              string
	shardd, shardctl string
	err              error
}

var bins binaries // the test binary's build cache, not daemon state

func TestMain(m *testing.M) {
	code := testhost.WithHome(m).Run() // no test reads the developer's home
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

func built(t *testing.T) (shardd, shardctl string) {
	t.Helper()
	bins.once.Do(func() {
		bins.dir, bins.err = os.MkdirTemp("", "shard-web-bin")
		if bins.err != nil {
			return
		}
		var paths []string
		paths, bins.err = shardtest.Build(bins.dir, nil, os.Stderr, "shardd", "shardctl")
		if bins.err == nil {
			bins.shardd, bins.shardctl = paths[0], paths[1]
		}
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.shardd, bins.shardctl
}

// chromiumPath finds Chromium; .ci/run installs Debian's chromium, so in
// its strict mode a missing Chromium fails the test (testhost.Missing).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testhost.Missing(t, "chromium", "none of chromium, chromium-browser, google-chrome in PATH")
	return ""
}

// freePort returns a loopback port nothing listens on now, for a daemon
// that must come back on the same origin after a restart.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// daemon is one shardd on its own home.
type daemon struct {
	t      *testing.T
	sd     *shardtest.Daemon
	home   string
	port   int
	stderr *shardtest.Buffer
}

func startDaemon(t *testing.T, home string, port int) *daemon {
	t.Helper()
	return startDaemonWith(t, home, port)
}

// startDaemonWith is startDaemon with more flags (config keys, e.g.
// --team.ci-command).
func startDaemonWith(t *testing.T, home string, port int, args ...string) *daemon {
	t.Helper()
	shardd, _ := built(t)
	d := &daemon{t: t, home: home, port: port, stderr: &shardtest.Buffer{}}
	sd, err := shardtest.StartDaemon(shardtest.DaemonOptions{
		Shardd: shardd, Home: home, Stderr: d.stderr,
		Args: append([]string{"--web-port", strconv.Itoa(port), "--store.no-sync"}, args...),
	})
	if err != nil {
		t.Fatal(err)
	}
	d.sd = sd
	t.Cleanup(func() {
		sd.Reap()
		if t.Failed() {
			if b, err := sd.Log(20000); err == nil {
				t.Logf("shardd.log (%s):\n%s", home, b)
			}
		}
	})
	if err := sd.WaitReady(readyTimeout); err != nil {
		t.Fatalf("%v\n%s", err, d.stderr.String())
	}
	if err := sd.WaitDiscovery(readyTimeout); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *daemon) url() string {
	u, err := d.sd.WebURL()
	if err != nil {
		d.t.Fatal(err)
	}
	return u
}

// ctl runs shardctl against the daemon and returns its stdout.
func (d *daemon) ctl(args ...string) string {
	d.t.Helper()
	_, shardctl := built(d.t)
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, shardctl, args...)
	cmd.Env = shardtest.CleanEnv("SHARD_HOME=" + d.home)
	out, err := cmd.Output()
	if err != nil {
		d.t.Fatalf("shardctl %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// browser is one Chromium (fresh profile) for a test.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 860),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx}
}

// page is one tab in its own browser context (its own cookies), with the
// console errors, uncaught exceptions and browser-log errors (CSP
// violations, failed loads) it saw.
type page struct {
	t    *testing.T
	name string
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

func (b *browser) newPage(name string) *page {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	b.t.Cleanup(cancel)
	p := &page{t: b.t, name: name, ctx: ctx}
	msgs := chromedp.Console(ctx)
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatalf("%s: open tab: %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == "assert" {
				p.mu.Lock()
				p.errs = append(p.errs, fmt.Sprintf("%s %s: %s %s", m.Type, m.Source, m.Text, m.URL))
				p.mu.Unlock()
			}
		}
	}()
	b.t.Cleanup(func() { cancel(); <-done })
	return p
}

// consoleErrors returns what the page reported so far.
func (p *page) consoleErrors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// run runs actions with the step deadline.
func (p *page) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		hctx, hcancel := context.WithTimeout(p.ctx, 5*time.Second)
		html, _ := chromedp.Run(hctx, chromedp.OuterHTML(chromedp.CSS("body")))
		hcancel()
		p.t.Fatalf("%s: %s: %v\nconsole: %q\nbody: %s", p.name, what, err, p.consoleErrors(), shardtest.Tail(html, 4000))
	}
}

// until waits until the JavaScript expression is truthy.
func (p *page) until(what, expr string) {
	p.t.Helper()
	p.run("wait for "+what, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(stepTimeout))(ctx, t)
		return err
	}))
}

// clickWhen waits until the element the JavaScript expression names
// exists, and clicks it (in the page, so no stale node can be hit).
func (p *page) clickWhen(what, expr string) {
	p.t.Helper()
	p.until(what, `(el => !!el && (el.click(), true))(`+expr+`)`)
}

// eval evaluates a JavaScript expression into a T.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	var out T
	p.run("eval "+expr, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		var err error
		out, err = chromedp.Evaluate[T](expr)(ctx, t)
		return err
	}))
	return out
}

// enroll opens a fresh `shardctl web enroll` link and then the dashboard,
// and waits until it is online.
func (p *page) enroll(d *daemon) {
	p.t.Helper()
	link := d.ctl("web", "enroll", "--note", p.name)
	p.run("enroll", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#open-dashboard")))
	// Following the page's link is a navigation the next wait could race;
	// open the same address directly.
	href := eval[string](p, `document.querySelector("#open-dashboard").href`)
	p.run("open the dashboard", chromedp.Navigate(href))
	p.online()
}

func (p *page) online() {
	p.t.Helper()
	p.until("online", `document.querySelector("#conn-state")?.textContent === "online"`)
}

// createAgent creates an agent from the page's form and waits until it is
// selected (another agent than the one selected before) and idle; it
// returns its id.
func (p *page) createAgent(cwd, name string) string {
	p.t.Helper()
	before := eval[string](p, `document.querySelector(".agentview")?.dataset.selected || ""`)
	// The form keeps the last directory for the next agent: replace it.
	p.until("directory cleared", `(el => !!el && (el.value = "", el.dispatchEvent(new Event("input", {bubbles: true})), true))(document.querySelector("#create-cwd"))`)
	p.run("create agent", chromedp.SendKeys(chromedp.CSS("#create-cwd"), cwd),
		chromedp.SendKeys(chromedp.CSS("#create-name"), name), chromedp.Click(chromedp.CSS("#create-go")))
	p.until("agent selected", fmt.Sprintf(`(s => !!s && s !== %q)(document.querySelector(".agentview")?.dataset.selected) && document.querySelector("#agent-status")?.textContent === "idle"`, before))
	return eval[string](p, `document.querySelector(".agentview").dataset.selected`)
}

// prompt types lines into the prompt box (Shift+Enter between them) and
// sends them with Enter.
func (p *page) prompt(lines ...string) {
	p.t.Helper()
	acts := []chromedp.Action[chromedp.Void]{chromedp.Focus(chromedp.CSS("#prompt"))}
	for i, l := range lines {
		if i > 0 {
			acts = append(acts, chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(kb.ModifierShift)))
		}
		acts = append(acts, chromedp.SendKeys(chromedp.CSS("#prompt"), l))
	}
	acts = append(acts, chromedp.KeyEvent(kb.Enter))
	p.run("prompt", acts...)
}

// screenshot saves the page as <name>.png into SHARD_WEB_SCREENSHOTS when
// it names a directory (docs/, the README's pictures), else into the
// test's temp dir, so the code path always runs.
func (p *page) screenshot(name string) {
	p.t.Helper()
	var buf []byte
	p.run("screenshot", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		var err error
		buf, err = chromedp.FullScreenshot(100)(ctx, t)
		return err
	}))
	dir := os.Getenv("SHARD_WEB_SCREENSHOTS")
	if dir == "" {
		dir = p.t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		p.t.Fatal(err)
	}
}
