//go:build linux

package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/input"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/shardtest"
)

// recordSent makes every document the page opens keep the records it
// sends on its WebSockets in window.__sent (parsed), so a test can read
// what went on the wire. It must run before the page is opened.
func (p *page) recordSent() {
	p.t.Helper()
	p.onNewDocument(`window.__sent = [];
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function (d) { try { window.__sent.push(JSON.parse(d)); } catch (e) {} return send.call(this, d); };`)
}

// onNewDocument runs source in every document the tab opens from now on,
// before the page's own scripts (a DevTools injection, outside the page's
// policy).
func (p *page) onNewDocument(source string) {
	p.t.Helper()
	p.run("inject", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: source})
		return err
	}))
}

// sent is what the page sent of the given type, as JSON objects.
func sent(p *page, typ string) []map[string]any {
	return eval[[]map[string]any](p, fmt.Sprintf(`(window.__sent || []).filter(m => m.type === %q)`, typ))
}

// writePNG writes a w×h PNG of one colour and returns its path and bytes.
func writePNG(t *testing.T, dir, name string, w, h int, c color.RGBA) (string, []byte) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, buf.Bytes()
}

// pasteImage pastes a PNG of the given bytes into the prompt box as a
// clipboard file named name.
func pasteImage(p *page, name string, b []byte) {
	p.t.Helper()
	eval[bool](p, fmt.Sprintf(`(() => {
  const b = Uint8Array.from(atob(%q), c => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([b], %q, {type: "image/png"}));
  document.querySelector("#prompt").dispatchEvent(new ClipboardEvent("paste", {clipboardData: dt, bubbles: true, cancelable: true}));
  return true;
})()`, base64.StdEncoding.EncodeToString(b), name))
}

// dropFile drags the file at path from outside the browser onto the
// prompt box and drops it there (DevTools drag input, as a person's drag
// from the file manager arrives).
func dropFile(p *page, path string) {
	p.t.Helper()
	r := eval[map[string]float64](p, `(r => ({x: r.x + r.width / 2, y: r.y + r.height / 2}))(document.querySelector("#prompt").getBoundingClientRect())`)
	data := &input.DragData{Items: []*input.DragDataItem{}, Files: []string{path}, DragOperationsMask: 1}
	p.run("drop "+path, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		for _, typ := range []input.DispatchDragEventType{input.DispatchDragEventTypeDragEnter, input.DispatchDragEventTypeDragOver, input.DispatchDragEventTypeDrop} {
			if _, err := chromedp.Call(ctx, input.DispatchDragEvent, input.DispatchDragEventParams{Type: typ, X: r["x"], Y: r["y"], Data: data}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// TestDashboardImageAttachments: images join a prompt by the file picker,
// by paste and by drop, show as thumbnails that can be removed before
// sending, and go out as the prompt's images (docs/protocol.md §9.2, §11
// Image: base64 data and mime type), in the order attached; the prompt
// shows them in the transcript. A file that is not an image is refused
// with a notice.
func TestDashboardImageAttachments(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.recordSent()
	p.enroll(d)
	p.createAgent(t.TempDir(), "looker")

	dir := t.TempDir()
	red, redBytes := writePNG(t, dir, "red.png", 3, 2, color.RGBA{255, 0, 0, 255})
	blue, _ := writePNG(t, dir, "blue.png", 2, 2, color.RGBA{0, 0, 255, 255})
	_, greenBytes := writePNG(t, dir, "green.png", 4, 4, color.RGBA{0, 255, 0, 255})
	grey, greyBytes := writePNG(t, dir, "grey.png", 5, 1, color.RGBA{90, 90, 90, 255})
	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("not an image"), 0o644); err != nil {
		t.Fatal(err)
	}

	thumbs := `[...document.querySelectorAll("#thumbs .thumb")].map(e => e.dataset.image).join(",")`
	p.run("pick two files", chromedp.SetUploadFiles(chromedp.CSS("#attach-input"), []string{red, blue}))
	p.until("two thumbnails", thumbs+` === "red.png,blue.png"`)
	pasteImage(p, "pasted.png", greenBytes)
	p.until("pasted thumbnail", thumbs+` === "red.png,blue.png,pasted.png"`)
	dropFile(p, grey)
	p.until("dropped thumbnail", thumbs+` === "red.png,blue.png,pasted.png,grey.png"`)
	p.until("thumbnails drawn", `[...document.querySelectorAll("#thumbs img")].every(i => i.complete && i.naturalWidth > 0 && i.src.startsWith("blob:"))`)
	p.screenshot("web-image-attachments")
	p.clickWhen("remove blue", `document.querySelector('#thumbs .thumb[data-image="blue.png"] button.remove')`)
	p.until("blue removed", thumbs+` === "red.png,pasted.png,grey.png"`)

	p.run("pick a text file", chromedp.SetUploadFiles(chromedp.CSS("#attach-input"), []string{notes}))
	p.until("refused", `document.querySelector("#notice").textContent === "image: notes.txt is not an image"`)
	if got := eval[string](p, thumbs); got != "red.png,pasted.png,grey.png" {
		t.Fatalf("thumbnails after the refusal: %q", got)
	}

	p.prompt("sim: say three pictures")
	p.until("thumbnails cleared once sent", `!document.querySelector("#thumbs")`)
	prompts := sent(p, "prompt")
	if len(prompts) != 1 {
		t.Fatalf("%d prompts sent; want 1", len(prompts))
	}
	ims, _ := prompts[0]["images"].([]any)
	want := [][]byte{redBytes, greenBytes, greyBytes}
	if len(ims) != len(want) || prompts[0]["message"] != "sim: say three pictures" {
		t.Fatalf("prompt sent %v; want the message and %d images", prompts[0], len(want))
	}
	for i, raw := range ims {
		im := raw.(map[string]any)
		if im["type"] != "image" || im["mime_type"] != "image/png" || im["data"] != base64.StdEncoding.EncodeToString(want[i]) || len(im) != 3 {
			t.Errorf("images[%d] = type %v mime %v, %d fields; want the attached PNG's bytes as §11 Image", i, im["type"], im["mime_type"], len(im))
		}
	}
	p.until("the prompt shows its images", `[...document.querySelectorAll(".msg.user")].some(m => m.textContent.includes("three pictures") && m.querySelectorAll("img.msg-img").length === 3 && [...m.querySelectorAll("img.msg-img")].every(i => i.complete && i.naturalWidth > 0))`)
	p.until("answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "three pictures") && document.querySelector("#agent-status")?.textContent === "idle"`)

	// An images-only prompt is a prompt (message "").
	p.run("pick one more", chromedp.SetUploadFiles(chromedp.CSS("#attach-input"), []string{red}))
	p.until("one thumbnail", thumbs+` === "red.png"`)
	p.run("send", chromedp.Click(chromedp.CSS("#send")))
	p.until("sent alone", `!document.querySelector("#thumbs")`)
	if prompts := sent(p, "prompt"); len(prompts) != 2 || prompts[1]["message"] != "" || len(prompts[1]["images"].([]any)) != 1 {
		t.Fatalf("images-only prompt sent as %v", prompts[len(prompts)-1])
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardImagesInTranscript: a prompt's images are kept in the
// transcript, so the page shows them again from sync after a reload
// (docs/protocol.md §13 P4: the user message's image block names the
// stored image, and the page fetches it with get_image).
func TestDashboardImagesInTranscript(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	p.createAgent(t.TempDir(), "remembers")
	red, _ := writePNG(t, t.TempDir(), "red.png", 3, 2, color.RGBA{255, 0, 0, 255})
	p.run("pick", chromedp.SetUploadFiles(chromedp.CSS("#attach-input"), []string{red}))
	p.until("thumbnail", `!!document.querySelector("#thumbs .thumb")`)
	p.prompt("sim: say kept")
	p.until("answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "kept") && document.querySelector("#agent-status")?.textContent === "idle"`)
	p.run("reload", chromedp.Reload())
	p.online()
	p.until("the image from sync", `[...document.querySelectorAll(".msg.user")].some(m => m.textContent.includes("say kept") && !m.dataset.msg.startsWith("local:") && [...m.querySelectorAll("img.msg-img")].some(i => i.complete && i.naturalWidth === 3))`)
}

// TestDashboardReasoningLevel: the model picker names each model's
// provider; on a model with reasoning levels (capabilities
// reasoning-catalog, reasoning-switch) the page lists the runtime's levels
// (list_reasoning_levels) and sets one (set_reasoning_level with the model
// it showed), which the next provider call runs with.
func TestDashboardReasoningLevel(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.recordSent()
	p.enroll(d)
	p.createAgent(t.TempDir(), "thinker")

	p.until("model picker", `[...document.querySelectorAll("#model option")].some(o => o.value === "sim/sim-think")`)
	if got := eval[[]string](p, `[...document.querySelectorAll("#model option")].map(o => o.textContent)`); strings.Join(got, "|") != "sim · sim|sim · sim-think" {
		t.Fatalf("model options %q; want provider · model", got)
	}
	if eval[bool](p, `!!document.querySelector("#reasoning")`) {
		t.Fatal("a reasoning picker for a model without levels")
	}
	p.run("switch model", chromedp.SetValue(chromedp.CSS("#model"), "sim/sim-think"), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`document.querySelector("#model").dispatchEvent(new Event("change", {bubbles: true}))`)(ctx, tg)
		return err
	}))
	p.until("reasoning picker", `[...document.querySelectorAll("#reasoning option")].map(o => o.value + ":" + o.textContent).join(",") === "off:Off,low:Low,high:High" && document.querySelector("#reasoning").value === "off"`)
	p.run("pick high", chromedp.SetValue(chromedp.CSS("#reasoning"), "high")) // fires input and change
	p.until("reasoning set", `/^reasoning: done/.test(document.querySelector("#notice").textContent) && document.querySelector("#reasoning").value === "high"`)
	sets := sent(p, "set_reasoning_level")
	if len(sets) != 1 || sets[0]["model"] != "sim/sim-think" || sets[0]["effort"] != "high" {
		t.Fatalf("set_reasoning_level sent %v", sets)
	}
	p.prompt("sim: say pondered")
	p.until("the turn thought at high effort", `[...document.querySelectorAll(".msg.assistant .thinking")].some(e => e.textContent.includes("Thinking with high effort.")) && document.querySelector("#agent-status")?.textContent === "idle"`)
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardProtocolVersionMismatch: a hello whose protocol_version has
// a major version the page does not speak (docs/protocol.md §7) makes the
// page disconnect and say so, sending nothing.
func TestDashboardProtocolVersionMismatch(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.recordSent()
	// The daemon's hello, as a daemon of protocol 1.0.0 would say it.
	p.onNewDocument(`const desc = Object.getOwnPropertyDescriptor(WebSocket.prototype, "onmessage");
Object.defineProperty(WebSocket.prototype, "onmessage", {
  configurable: true, get() { return desc.get.call(this); },
  set(fn) { desc.set.call(this, (ev) => {
    let data = ev.data;
    try { const m = JSON.parse(data); if (m.type === "hello") { m.protocol_version = "1.0.0"; data = JSON.stringify(m); } } catch (e) {}
    fn.call(this, new MessageEvent("message", { data }));
  }); },
});`)
	link := d.ctl("web", "enroll", "--note", "owner")
	p.run("enroll", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#open-dashboard")))
	href := eval[string](p, `document.querySelector("#open-dashboard").href`)
	p.run("open the dashboard", chromedp.Navigate(href))
	p.until("incompatible", `document.querySelector("#incompatible-reason")?.textContent.includes("1.0.0") && document.querySelector("#incompatible-reason").textContent.includes("0.x")`)
	p.screenshot("web-incompatible")
	if n := eval[int](p, `window.__sent.length`); n != 0 {
		t.Fatalf("the page sent %d records to an incompatible daemon", n)
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardExitReasonAndNewRuntime: when the runtime exits, the page
// shows agent_exited's reason and exit code; the next prompt brings a new
// runtime generation, whose sync (a new runtime_epoch) makes the page read
// the mode, model and reasoning catalogs again, and the exit note goes.
func TestDashboardExitReasonAndNewRuntime(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.recordSent()
	p.enroll(d)
	id := p.createAgent(t.TempDir(), "crasher")
	p.until("catalogs of epoch 0", `document.querySelector(".agentview").dataset.catalogEpoch === "0" && !!document.querySelector("#model option")`)
	before := len(sent(p, "list_models"))

	p.prompt("sim: exit 3")
	p.until("exit shown", `/^Runtime exited: .+ \(exit code 3\)/.test(document.querySelector("#agent-exit")?.textContent || "")`)
	p.until("exit in the overview", fmt.Sprintf(`!!document.querySelector('[data-agent=%q] .exit')?.textContent.startsWith("exited: ")`, id))
	p.until("nothing streams", `document.querySelector("#agent-status")?.textContent === "error" && !!document.querySelector("#send")`)
	p.screenshot("web-agent-exited")
	if eval[string](p, `document.querySelector(".agentview").dataset.catalogEpoch`) != "0" {
		t.Fatal("catalogs re-read before a new runtime")
	}

	p.prompt("sim: say back again")
	p.until("answer from the new runtime", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "back again")`)
	if prompts := sent(p, "prompt"); prompts[len(prompts)-1]["streaming_behavior"] != nil {
		t.Fatalf("the prompt after the exit went out as %v; want a plain prompt", prompts[len(prompts)-1]["streaming_behavior"])
	}
	p.until("catalogs of epoch 1", `document.querySelector(".agentview").dataset.catalogEpoch === "1" && !!document.querySelector("#model option") && !!document.querySelector("#mode option")`)
	if after := len(sent(p, "list_models")); after != before+1 {
		t.Fatalf("list_models sent %d times after the new runtime; want once", after-before)
	}
	p.until("exit note gone", `!document.querySelector("#agent-exit")`)
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardUsageAndContextAfterReload: the usage totals and the
// context fill come back after a reload, from AgentInfo.usage and the
// model catalog's context window, not only from live events.
func TestDashboardUsageAndContextAfterReload(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	p.createAgent(t.TempDir(), "counted")
	p.prompt("sim: say counting tokens")
	p.until("answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "counting tokens") && document.querySelector("#agent-status")?.textContent === "idle"`)
	p.until("usage and context", `/^\S+ in · \S+ out/.test(document.querySelector("#agent-usage")?.textContent || "") && Number(document.querySelector("#context-fill")?.dataset.tokens) > 0`)
	usage := eval[string](p, `document.querySelector("#agent-usage").textContent`)
	tokens := eval[string](p, `document.querySelector("#context-fill").dataset.tokens`)
	if w := eval[string](p, `document.querySelector("#context-fill").dataset.window`); w != "200000" {
		t.Fatalf("context window %q; want the sim's 200000", w)
	}

	p.run("reload", chromedp.Reload())
	p.online()
	p.until("usage after the reload", fmt.Sprintf(`document.querySelector("#agent-usage")?.textContent === %q`, usage))
	p.until("context after the reload", fmt.Sprintf(`document.querySelector("#context-fill")?.dataset.tokens === %q && document.querySelector("#context-fill").dataset.window === "200000" && document.querySelector("#context-fill meter").value > 0`, tokens))
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardAnswersAndRefusalReason: a confirm is answered "yes", an
// input with the typed text, and a permission refused with a reason sends
// permission_response.reason (docs/protocol.md §9.5).
func TestDashboardAnswersAndRefusalReason(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.recordSent()
	p.enroll(d)
	p.createAgent(t.TempDir(), "asker")

	p.prompt("sim: ask confirm Proceed")
	p.clickWhen("yes", `document.querySelector('.dialog.ui button.choice[data-choice="yes"]')`)
	p.until("confirm answered", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("answer:") && e.textContent.includes("yes")) && document.querySelector("#agent-status")?.textContent === "idle"`)

	p.prompt("sim: ask input Name")
	p.until("input dialog", `!!document.querySelector(".dialog.ui input")`)
	p.run("type", chromedp.SendKeys(chromedp.CSS(".dialog.ui input"), "Ada"))
	p.clickWhen("submit", `document.querySelector('.dialog.ui button.choice[data-choice="submit"]')`)
	p.until("input answered", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("Ada")) && document.querySelector("#agent-status")?.textContent === "idle"`)

	p.prompt(`sim: tool bash {"command":"echo refused"}`)
	p.until("permission dialog", `!!document.querySelector(".dialog.perm input.reason")`)
	p.run("reason", chromedp.SendKeys(chromedp.CSS(".dialog.perm input.reason"), "not on this machine"))
	p.clickWhen("deny", `document.querySelector(".dialog.perm button.i-deny")`)
	p.until("refused", `!document.querySelector(".dialog.perm") && document.querySelector("#agent-status")?.textContent === "idle"`)
	resp := sent(p, "permission_response")
	if len(resp) != 1 || resp[0]["reason"] != "not on this machine" || (resp[0]["decision"] != "deny" && resp[0]["choice_id"] == nil) {
		t.Fatalf("permission_response sent %v; want a refusal with the reason", resp)
	}
	uis := sent(p, "ui_response")
	if len(uis) != 2 || uis[0]["value"] != "yes" || uis[1]["value"] != "Ada" {
		t.Fatalf("ui_response sent %v", uis)
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardAgentCardsOneLine: at 1440 px every agent card keeps its
// attached-clients count ("0 attached", "1 attached") on one line.
func TestDashboardAgentCardsOneLine(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	p.run("1440 px", chromedp.EmulateViewport(1440, 900))
	first := p.createAgent(t.TempDir(), "first")
	// The form keeps the directory; a second agent in it.
	p.run("create a second agent", chromedp.SendKeys(chromedp.CSS("#create-name"), "second"), chromedp.Click(chromedp.CSS("#create-go")))
	p.until("second selected", fmt.Sprintf(`document.querySelectorAll(".agent").length === 2 && document.querySelector(".agentview").dataset.selected !== %q`, first))
	second := eval[string](p, `document.querySelector(".agentview").dataset.selected`)
	p.until("first left alone", clientsOf(first)+` === "0 attached" && `+clientsOf(second)+` === "1 attached"`)
	p.screenshot("web-cards-1440")
	lines := eval[[]float64](p, `[...document.querySelectorAll(".agent .clients")].map(e => e.getBoundingClientRect().height / parseFloat(getComputedStyle(e).lineHeight))`)
	if len(lines) != 2 {
		t.Fatalf("%d cards with a clients count; want 2", len(lines))
	}
	for i, n := range lines {
		if n > 1.01 {
			t.Errorf("card %d: the clients count takes %.2f lines; want 1", i, n)
		}
	}
}

// TestDashboardRenameAgent: the overview and the header show an agent's
// title with its id secondary, and the page renames it (agent.update
// {agent_id, title}), which a reload reads back from agent.list.
func TestDashboardRenameAgent(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	id := p.createAgent(t.TempDir(), "")
	p.run("rename", chromedp.Click(chromedp.CSS("#rename")))
	p.run("type the title", chromedp.SendKeys(chromedp.CSS("#title-input"), "Fix the parser"), chromedp.Click(chromedp.CSS("#title-save")))
	p.until("renamed", `/^rename: done/.test(document.querySelector("#notice").textContent) && document.querySelector("#agent-title").textContent === "Fix the parser"`)
	p.until("id secondary", fmt.Sprintf(`document.querySelector("#agent-id")?.textContent === %q && document.querySelector('[data-agent=%q] .name').textContent === "Fix the parser" && document.querySelector('[data-agent=%q] .aid').textContent === %q`, id, id, id, id))
	p.run("reload", chromedp.Reload())
	p.online()
	p.until("the title is the daemon's", fmt.Sprintf(`document.querySelector('[data-agent=%q] .name')?.textContent === "Fix the parser"`, id))
}

// TestDashboardAskKinds: the agent's ask tool raises every ui_request kind
// the page answers: a select with several answers (ui_request.multiple,
// checkboxes, answered string[]), an editor (its prefill edited), and a
// notify, which stays on the page as a notice once closed.
func TestDashboardAskKinds(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.recordSent()
	p.enroll(d)
	p.createAgent(t.TempDir(), "asks")

	p.prompt(`sim: tool ask {"kind":"select","title":"Toppings","options":["ham","egg","cress"],"multiple":true}`)
	p.until("checkboxes", `document.querySelectorAll('.dialog.ui input[type=checkbox]').length === 3`)
	p.clickWhen("cress", `document.querySelector('.dialog.ui input[data-option="cress"]')`)
	p.clickWhen("egg", `document.querySelector('.dialog.ui input[data-option="egg"]')`)
	p.clickWhen("submit", `document.querySelector('.dialog.ui button[data-choice="submit"]')`)
	p.until("answered", `!document.querySelector(".dialog.ui") && document.querySelector("#agent-status")?.textContent === "idle"`)

	p.prompt(`sim: tool ask {"kind":"editor","title":"Notes","prefill":"first line"}`)
	p.until("editor", `document.querySelector(".dialog.ui textarea")?.value === "first line"`)
	p.run("edit", chromedp.SendKeys(chromedp.CSS(".dialog.ui textarea"), " and more"))
	p.clickWhen("submit", `document.querySelector('.dialog.ui button[data-choice="submit"]')`)
	p.until("answered", `!document.querySelector(".dialog.ui") && document.querySelector("#agent-status")?.textContent === "idle"`)

	p.prompt(`sim: tool ask {"kind":"notify","title":"Heads up","message":"deploy at five","notify_type":"warning"}`)
	p.until("the notice stays", `[...document.querySelectorAll(".closed-note.notice-note")].some(e => e.textContent === "Notice (warning): Heads up — deploy at five")`)

	uis := sent(p, "ui_response")
	if len(uis) < 2 || fmt.Sprint(uis[0]["value"]) != "[egg cress]" || uis[1]["value"] != "first line and more" {
		t.Fatalf("ui_response sent %v; want [egg cress] in the options' order, then the edited text", uis)
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardModelsOfEveryProvider: with a second provider configured
// (an OpenAI-compatible server, here the loopback fake), the model picker
// lists the models of both, grouped by provider; switching to the other
// provider's model runs the next turn there, and the overview says which
// provider and model the agent runs.
func TestDashboardModelsOfEveryProvider(t *testing.T) {
	fake := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "from the local server", Usage: fakellm.Usage{Input: 5, Output: 4}}
	}))
	b := newBrowser(t)
	home := filepath.Join(shardtest.ShortTemp(t, "wb"), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "providers:\n  local:\n    kind: openai\n    base_url: " + fake.URL + "/v1\n    models: [qwen3, llama]\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, home, 0)
	p := b.newPage("owner")
	p.enroll(d)
	id := p.createAgent(t.TempDir(), "travels")

	p.until("both providers", `[...document.querySelectorAll("#model optgroup")].map(g => g.label + ":" + [...g.querySelectorAll("option")].map(o => o.value).join(",")).join(" ") === "sim:sim/sim,sim/sim-think local:local/qwen3,local/llama"`)
	p.run("switch to local/llama", chromedp.SetValue(chromedp.CSS("#model"), "local/llama"))
	p.until("switched", `/^model: done/.test(document.querySelector("#notice").textContent) && document.querySelector("#model").value === "local/llama"`)
	p.prompt("hello")
	p.until("answer from the other provider", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "from the local server") && document.querySelector("#agent-status")?.textContent === "idle"`)
	if fake.Count() != 1 || fake.Request(t, 1).Body["model"] != "llama" {
		t.Fatalf("the local server got %d requests; want one for llama", fake.Count())
	}
	p.until("overview names the provider", fmt.Sprintf(`document.querySelector('[data-agent=%q] .meta')?.textContent.includes("local/llama")`, id))
	p.screenshot("web-models-of-every-provider")
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}
