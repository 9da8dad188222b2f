package daemon_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// Images over the wire (docs/protocol.md §9.2 prompt/steer images, §13 P4),
// against the real daemon and runtime binary, the model a loopback fake.

// testPNG is a small image: the PNG signature and a few bytes, which is
// all the runtime checks and all the fake model needs to see.
var testPNG = append([]byte("\x89PNG\r\n\x1a\n"), []byte("a tiny test image")...)

func pngImage(b []byte) protocol.Image {
	return protocol.Image{Type: protocol.ImageType, MimeType: protocol.MIMEPNG, Data: base64.StdEncoding.EncodeToString(b)}
}

// startImages starts a daemon on provider name ("openai" or "anthropic")
// served by a fake that answers every request "seen.".
func startImages(t *testing.T, name string, mutate func(*config.Config)) (*harness, *fakellm.Server) {
	t.Helper()
	fake := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "seen.", Usage: fakellm.Usage{Input: 10, Output: 2}}
	}))
	h := start(t, func(cfg *config.Config) {
		cfg.Provider.Name = name
		cfg.Provider.BaseURL = fake.URL + "/v1"
		if name == "anthropic" {
			cfg.Provider.BaseURL = fake.URL
		}
		cfg.Provider.Model = "vision-model"
		if mutate != nil {
			mutate(cfg)
		}
	})
	return h, fake
}

// promptImages sends a prompt with images and returns the error of its
// response (nil: accepted).
func promptImages(t *testing.T, c *client.Conn, id, text string, ims ...protocol.Image) error {
	t.Helper()
	_, err := c.Request(ctx(t), &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: id}, Message: text, Images: ims})
	return err
}

// imageBlocks returns the image blocks of the user messages of a sync's
// live window, in order.
func imageBlocks(s *protocol.Sync) []protocol.ContentBlock {
	var out []protocol.ContentBlock
	for _, m := range s.LiveWindow.Messages {
		for _, b := range m.Content {
			if m.Role == "user" && b.Type == protocol.BlockImage {
				out = append(out, b)
			}
		}
	}
	return out
}

// getImage fetches a stored image over the wire.
func getImage(t *testing.T, c *client.Conn, id, sha string) (protocol.Image, error) {
	t.Helper()
	var im protocol.Image
	err := c.Call(ctx(t), &protocol.GetImage{Header: protocol.Header{Type: protocol.TypeGetImage, AgentID: id}, SHA256: sha}, &im)
	return im, err
}

// TestImagesReachOpenAIAndSurviveRestarts: a prompt's image reaches an
// OpenAI-compatible server as an image_url part with its data: URL; an
// images-only prompt is a user message of images alone; sync shows the
// images as image blocks (no data) after a runtime restart and after a
// daemon restart, and get_image gives their bytes back; the image is one
// file beside the session.
func TestImagesReachOpenAIAndSurviveRestarts(t *testing.T) {
	h, fake := startImages(t, "openai", nil)
	c := h.dial()
	id := h.create(c, nil)
	sync := attach(t, c, id, "")
	if !strings.Contains(strings.Join(sync.Capabilities, ","), protocol.CapImageInput) {
		t.Fatalf("capabilities %v lack %s", sync.Capabilities, protocol.CapImageInput)
	}
	im := pngImage(testPNG)
	if err := promptImages(t, c, id, "what is this?", im); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	req := fake.Request(t, 1)
	msgs := fakellm.Get(t, req.Body, "messages").([]any)
	user := msgs[len(msgs)-1]
	want := "data:image/png;base64," + im.Data
	if got := fakellm.Get(t, user, "content", 0, "image_url", "url"); got != want {
		t.Fatalf("image part url = %v, want %s", got, want)
	}
	if got := fakellm.Get(t, user, "content", 0, "type"); got != "image_url" {
		t.Fatalf("first part type = %v", got)
	}
	if got := fakellm.Get(t, user, "content", 1, "text"); got != "what is this?" {
		t.Fatalf("text part = %v", got)
	}

	// Images only: the user message is the image and nothing else.
	if err := promptImages(t, c, id, "", im); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	msgs = fakellm.Get(t, fake.Request(t, 2).Body, "messages").([]any)
	parts := fakellm.Get(t, msgs[len(msgs)-1], "content").([]any)
	if len(parts) != 1 || fakellm.Get(t, parts[0], "image_url", "url") != want {
		t.Fatalf("images-only user message = %v", parts)
	}

	check := func(when string, s *protocol.Sync, c *client.Conn) {
		t.Helper()
		blocks := imageBlocks(s)
		if len(blocks) != 2 {
			t.Fatalf("%s: live window image blocks = %+v", when, blocks)
		}
		b := blocks[0]
		if b.MimeType != protocol.MIMEPNG || b.Size != int64(len(testPNG)) || !protocol.ValidSHA256(b.SHA256) || b.Data != "" || blocks[1].SHA256 != b.SHA256 {
			t.Fatalf("%s: image block = %+v", when, b)
		}
		got, err := getImage(t, c, id, b.SHA256)
		if err != nil || got != im {
			t.Fatalf("%s: get_image = %+v, %v", when, got, err)
		}
	}
	if _, err := c.Request(ctx(t), &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: id}, Force: true}); err != nil {
		t.Fatal(err)
	}
	check("after a runtime restart", attach(t, h.dial(), id, ""), c)

	files, _ := filepath.Glob(filepath.Join(h.cfg.Home, "sessions", "*", "images", "*.png"))
	if len(files) != 1 {
		t.Fatalf("stored image files = %v, want one", files)
	}
	if data, _ := os.ReadFile(files[0]); !bytes.Equal(data, testPNG) {
		t.Fatalf("stored file holds %q", data)
	}

	h.d.Shutdown(true)
	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	check("after a daemon restart", attach(t, c2, id, ""), c2)
	if _, err := getImage(t, c2, id, strings.Repeat("0", 64)); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("get_image of an unknown image: %v", err)
	}
}

// TestImagesReachAnthropic: the image reaches the Messages API as an image
// block with a base64 source, before the text; a steer's image too.
func TestImagesReachAnthropic(t *testing.T) {
	h, fake := startImages(t, "anthropic", nil)
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	im := pngImage(testPNG)
	if err := promptImages(t, c, id, "describe", im); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	msgs := fakellm.Get(t, fake.Request(t, 1).Body, "messages").([]any)
	user := msgs[len(msgs)-1]
	if fakellm.Get(t, user, "content", 0, "type") != "image" ||
		fakellm.Get(t, user, "content", 0, "source", "type") != "base64" ||
		fakellm.Get(t, user, "content", 0, "source", "media_type") != protocol.MIMEPNG ||
		fakellm.Get(t, user, "content", 0, "source", "data") != im.Data ||
		fakellm.Get(t, user, "content", 1, "text") != "describe" {
		t.Fatalf("user message = %v", user)
	}

	// steer with an image: idle, it starts a turn like a prompt.
	if _, err := c.Request(ctx(t), &protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, AgentID: id}, Images: []protocol.Image{im}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	msgs = fakellm.Get(t, fake.Request(t, 2).Body, "messages").([]any)
	if fakellm.Get(t, msgs[len(msgs)-1], "content", 0, "source", "data") != im.Data {
		t.Fatalf("steer's user message = %v", msgs[len(msgs)-1])
	}
}

// TestImageRefusals: an image over the limit is INVALID_REQUEST with the
// limit's data and changes nothing (no turn, no message, the agent still
// answers); a model configured as text-only refuses images UNSUPPORTED,
// and its sync does not offer image input.
func TestImageRefusals(t *testing.T) {
	h, fake := startImages(t, "openai", func(cfg *config.Config) {
		// A second provider on the same fake serves the text-only model.
		cfg.Providers = map[string]config.ProviderEntry{"text": {Kind: config.ProviderOpenAI, BaseURL: cfg.Provider.BaseURL, Models: []string{"text-model"}}}
		cfg.Provider.TextOnlyModels = "text-model"
	})
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")

	big := append(bytes.Clone(testPNG), make([]byte, protocol.MaxImageBytes)...)
	err := promptImages(t, c, id, "too big", pngImage(big))
	var pe *protocol.Error
	if protocol.CodeOf(err) != protocol.CodeInvalidRequest || !errors.As(err, &pe) {
		t.Fatalf("over-limit image: %v", err)
	}
	if !strings.Contains(pe.Message, `"images[0].data"`) || !strings.Contains(pe.Message, "limit 5242880 bytes") {
		t.Fatalf("over-limit message = %q", pe.Message)
	}

	// Nothing was lost or run: the next prompt is the first model request,
	// and the window holds its message only.
	prompt(t, c, id, "hello")
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	if n := fake.Count(); n != 1 {
		t.Fatalf("model requests = %d, want 1", n)
	}
	s := attach(t, h.dial(), id, "")
	if len(s.LiveWindow.Messages) != 2 || len(imageBlocks(s)) != 0 {
		t.Fatalf("live window after the refusal = %+v", s.LiveWindow.Messages)
	}

	// A text-only model: UNSUPPORTED, and no image-input capability.
	text := h.create(c, func(m *protocol.AgentCreate) { m.Model = "text/text-model" })
	if s := attach(t, c, text, ""); strings.Contains(strings.Join(s.Capabilities, ","), protocol.CapImageInput) {
		t.Fatalf("text-only model offers %s: %v", protocol.CapImageInput, s.Capabilities)
	}
	if err := promptImages(t, c, text, "look", pngImage(testPNG)); protocol.CodeOf(err) != protocol.CodeUnsupported {
		t.Fatalf("image to a text-only model: %v", err)
	}
	if n := fake.Count(); n != 1 {
		t.Fatalf("model requests = %d after the refusal, want 1", n)
	}
}

// hasImageInput reports whether caps offer image input.
func hasImageInput(caps []string) bool {
	for _, c := range caps {
		if c == protocol.CapImageInput {
			return true
		}
	}
	return false
}

// TestImagesTextOnlyPerProvider: a `providers:` entry's text_only_models
// make that provider's model refuse images UNSUPPORTED (no request made)
// and drop image-input from its sync and from model_changed, while the
// same model name on another provider, and the entry's other models, take
// images; switching back to the text-only model sends it the images
// already in the conversation as text.
func TestImagesTextOnlyPerProvider(t *testing.T) {
	h, fake := startImages(t, "openai", func(cfg *config.Config) {
		// "vision-model" on the block's provider takes images; on "text",
		// served by the same fake, it does not.
		cfg.Providers = map[string]config.ProviderEntry{"text": {Kind: config.ProviderOpenAI, BaseURL: cfg.Provider.BaseURL,
			Models: []string{"vision-model", "seeing"}, TextOnlyModels: []string{"vision-model"}}}
	})
	c := h.dial()
	im := pngImage(testPNG)

	textOnly := h.create(c, func(m *protocol.AgentCreate) { m.Provider, m.Model = "text", "vision-model" })
	wantRuns(t, c, textOnly, "text", "vision-model", "created on text/vision-model")
	if s := attach(t, c, textOnly, ""); hasImageInput(s.Capabilities) {
		t.Fatalf("text/vision-model offers %s: %v", protocol.CapImageInput, s.Capabilities)
	}
	if err := promptImages(t, c, textOnly, "look", im); protocol.CodeOf(err) != protocol.CodeUnsupported {
		t.Fatalf("image to text/vision-model: err = %v, want UNSUPPORTED", err)
	}
	if n := fake.Count(); n != 0 {
		t.Fatalf("the refused prompt made %d model requests", n)
	}

	// The same model name on the block's provider takes images.
	c2 := h.dial()
	vision := h.create(c2, func(m *protocol.AgentCreate) { m.Model = "openai/vision-model" })
	if s := attach(t, c2, vision, ""); !hasImageInput(s.Capabilities) {
		t.Fatalf("openai/vision-model lacks %s: %v", protocol.CapImageInput, s.Capabilities)
	}
	if err := promptImages(t, c2, vision, "look", im); err != nil {
		t.Fatalf("image to openai/vision-model: %v", err)
	}
	waitFor(t, c2, isType(protocol.TypeTurnEnd, vision))
	msgs := fakellm.Get(t, fake.Request(t, 1).Body, "messages").([]any)
	if got := fakellm.Get(t, msgs[len(msgs)-1], "content", 0, "image_url", "url"); got != "data:image/png;base64,"+im.Data {
		t.Fatalf("openai/vision-model's request: image part url = %v", got)
	}

	// Switching the text-only agent to the entry's other model offers
	// images again; that model gets them.
	setModel := func(model string) *protocol.ModelChanged {
		t.Helper()
		if err := c.Call(ctx(t), &protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, AgentID: textOnly}, Model: model}, nil); err != nil {
			t.Fatalf("set_model %s: %v", model, err)
		}
		return waitFor(t, c, isType(protocol.TypeModelChanged, textOnly)).Msg.(*protocol.ModelChanged)
	}
	if ch := setModel("text/seeing"); !hasImageInput(ch.Capabilities) {
		t.Fatalf("model_changed to text/seeing: capabilities %v lack %s", ch.Capabilities, protocol.CapImageInput)
	}
	if err := promptImages(t, c, textOnly, "now look", im); err != nil {
		t.Fatalf("image to text/seeing: %v", err)
	}
	waitFor(t, c, isType(protocol.TypeTurnEnd, textOnly))
	req := fake.Request(t, 2)
	msgs = fakellm.Get(t, req.Body, "messages").([]any)
	if modelOf(req) != "seeing" || fakellm.Get(t, msgs[len(msgs)-1], "content", 0, "type") != "image_url" {
		t.Fatalf("text/seeing's request: model %v, user message %v", modelOf(req), msgs[len(msgs)-1])
	}

	// Back on the text-only model: no image-input, images refused, and
	// the conversation's image reaches it as a line of text.
	if ch := setModel("text/vision-model"); hasImageInput(ch.Capabilities) {
		t.Fatalf("model_changed to text/vision-model: capabilities %v offer %s", ch.Capabilities, protocol.CapImageInput)
	}
	if s := attach(t, h.dial(), textOnly, ""); hasImageInput(s.Capabilities) {
		t.Fatalf("sync on text/vision-model offers %s: %v", protocol.CapImageInput, s.Capabilities)
	}
	if err := promptImages(t, c, textOnly, "again", im); protocol.CodeOf(err) != protocol.CodeUnsupported {
		t.Fatalf("image to text/vision-model after set_model: err = %v, want UNSUPPORTED", err)
	}
	if n := fake.Count(); n != 2 {
		t.Fatalf("model requests = %d after the second refusal, want 2", n)
	}
	if got := turn(t, c, textOnly, "and now?"); got != "seen." {
		t.Fatalf("text-only turn answered %q", got)
	}
	req = fake.Request(t, 3)
	body := fmt.Sprint(req.Body["messages"])
	if modelOf(req) != "vision-model" || strings.Contains(body, "image_url") || !strings.Contains(body, "the model in use does not take images") {
		t.Fatalf("text/vision-model's request: model %v, messages %s", modelOf(req), body)
	}
}

// realPNG is a valid 2×2 PNG, for agents that decode what they are sent.
func realPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestImagesToACPAgents: an ACP agent that advertises
// promptCapabilities.image gets the prompt's images as ACP image blocks
// (base64 data and MIME type) with the text, its window names them and
// get_image serves them; one that does not is UNSUPPORTED, offers no
// image-input, and still takes text. The agent is this test binary
// playing a minimal ACP agent (fakeacp_test.go).
func TestImagesToACPAgents(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, func(cfg *config.Config) {
		cfg.Runtimes["seeing"] = config.RuntimeProfile{Kind: config.KindACP, Command: []string{self},
			Env: map[string]string{fakeACPEnv: "1", fakeACPImagesEnv: "1"}}
		cfg.Runtimes["blind"] = config.RuntimeProfile{Kind: config.KindACP, Command: []string{self},
			Env: map[string]string{fakeACPEnv: "1"}}
	})
	c := h.dial()
	im := pngImage(testPNG)

	blind := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "blind" })
	if s := attach(t, c, blind, ""); strings.Contains(strings.Join(s.Capabilities, ","), protocol.CapImageInput) {
		t.Fatalf("blind agent offers %s: %v", protocol.CapImageInput, s.Capabilities)
	}
	if err := promptImages(t, c, blind, "look", im); protocol.CodeOf(err) != protocol.CodeUnsupported {
		t.Fatalf("images to an agent without image prompts: %v", err)
	}
	prompt(t, c, blind, "hi")
	if got := deltaText(collectUntil(t, c, isType(protocol.TypeTurnEnd, blind))); got != "text=hi images=0 mime=" {
		t.Fatalf("blind agent answered %q", got)
	}

	seeing := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "seeing" })
	if s := attach(t, c, seeing, ""); !strings.Contains(strings.Join(s.Capabilities, ","), protocol.CapImageInput) {
		t.Fatalf("seeing agent lacks %s: %v", protocol.CapImageInput, s.Capabilities)
	}
	if err := promptImages(t, c, seeing, "look", im); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("text=look images=1 mime=image/png/%d", len(im.Data))
	if got := deltaText(collectUntil(t, c, isType(protocol.TypeTurnEnd, seeing))); got != want {
		t.Fatalf("seeing agent answered %q, want %q", got, want)
	}
	s := attach(t, h.dial(), seeing, "")
	blocks := imageBlocks(s)
	if len(blocks) != 1 || blocks[0].Size != int64(len(testPNG)) {
		t.Fatalf("window image blocks = %+v", blocks)
	}
	if got, err := getImage(t, c, seeing, blocks[0].SHA256); err != nil || got != im {
		t.Fatalf("get_image = %+v, %v", got, err)
	}
}

// TestImagesReachCodex: codex-acp, which advertises image prompts, gets
// the image and sends it on to its model (the Responses API) as an
// input_image with a data: URL.
func TestImagesReachCodex(t *testing.T) {
	h, fake, _ := startCodex(t)
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "codex" })
	if s := attach(t, c, id, ""); !strings.Contains(strings.Join(s.Capabilities, ","), protocol.CapImageInput) {
		t.Fatalf("codex lacks %s: %v", protocol.CapImageInput, s.Capabilities)
	}
	if err := promptImages(t, c, id, "what is in this picture?", pngImage(realPNG(t))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	found := false
	for _, r := range fake.Requests() {
		found = found || strings.HasSuffix(r.Path, "/responses") &&
			strings.Contains(string(r.Raw), `"type":"input_image"`) && strings.Contains(string(r.Raw), `"data:image/png;base64,`)
	}
	if !found {
		t.Fatalf("no Responses request carried an input_image with a PNG data: URL (%d requests)", fake.Count())
	}
}

// TestImagesToPi: pi whose model takes images ("input": ["text","image"])
// gets them (pi's ImageContent) and sends them on to its model as
// image_url parts with a data: URL; pi whose model takes text only refuses
// them UNSUPPORTED.
func TestImagesToPi(t *testing.T) {
	for _, tc := range []struct {
		input  string
		images bool
	}{{`["text","image"]`, true}, {`["text"]`, false}} {
		h, _, fake := startPiWith(t, tc.input)
		c := h.dial()
		id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "pi" })
		s := attach(t, c, id, "")
		if got := strings.Contains(strings.Join(s.Capabilities, ","), protocol.CapImageInput); got != tc.images {
			t.Fatalf("input %s: capabilities %v", tc.input, s.Capabilities)
		}
		err := promptImages(t, c, id, "what is this?", pngImage(realPNG(t)))
		if !tc.images {
			if protocol.CodeOf(err) != protocol.CodeUnsupported {
				t.Fatalf("images to pi with a text-only model: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, c, isType(protocol.TypeTurnEnd, id))
		found := false
		for _, r := range fake.Requests() {
			found = found || strings.Contains(string(r.Raw), `"image_url"`) && strings.Contains(string(r.Raw), `"url":"data:image/png;base64,`)
		}
		if !found {
			t.Fatalf("no chat request carried an image_url part (%d requests)", fake.Count())
		}
	}
}
