package refagent

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/images"
)

// pngBytes is the smallest image the runtime takes: the PNG signature and
// a few bytes.
var pngBytes = append([]byte("\x89PNG\r\n\x1a\n"), "tiny"...)

func testImage() protocol.Image {
	return protocol.Image{Type: protocol.ImageType, MimeType: protocol.MIMEPNG, Data: base64.StdEncoding.EncodeToString(pngBytes)}
}

// TestSteerWithImageMidTurn: a steer's image joins the live window with
// it before the turn's next provider call (the sim names it), and a
// runtime without a session directory keeps it in memory for get_image.
func TestSteerWithImageMidTurn(t *testing.T) {
	h := start(t, nil)
	h.handshake()
	h.prompt("sim: say first\nsim: sleep 200\nsim: say original")
	h.until(protocol.TypeMessageDelta)
	h.send(protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer, ID: "st"}, Message: "and this", Images: []protocol.Image{testImage()}})
	r, _ := h.response("st")
	mustResponse(t, r, protocol.TypeSteer)
	evs := h.untilIdle()
	mcs := of[*protocol.MessageComplete](evs)
	want := "You said: [image image/png, 12 bytes]\nand this"
	if len(mcs) != 2 || textOf(mcs[1].Message) != want {
		t.Fatalf("answers %v", types(evs))
	}
	w := h.quietSync().LiveWindow.Messages
	steer := w[len(w)-2]
	b := steer.Content[0]
	if steer.Role != roleUser || b.Type != protocol.BlockImage || b.Size != int64(len(pngBytes)) || b.Data != "" || steer.Content[1].Text != "and this" {
		t.Fatalf("steer message %+v", steer)
	}
	h.send(protocol.GetImage{Header: protocol.Header{Type: protocol.TypeGetImage, ID: "gi"}, SHA256: b.SHA256})
	r, _ = h.response("gi")
	if im := decodeData[protocol.Image](t, r); im != testImage() {
		t.Fatalf("get_image = %+v", im)
	}
}

// TestForkLinksImages: a fork's images are in the fork's own images/, so
// the fork, a session of its own, still has them; the source keeps its
// own.
func TestForkLinksImages(t *testing.T) {
	dir := sessionDir(t)
	h, _ := inSession(t, dir, nil)
	h.send(protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: "p"}, Images: []protocol.Image{testImage()}})
	h.untilIdle()
	w := h.quietSync().LiveWindow.Messages
	b := w[0].Content[0]
	if len(w[0].Content) != 1 || b.Type != protocol.BlockImage {
		t.Fatalf("images-only message %+v", w[0])
	}
	r, _ := h.sessionOp("fork", map[string]any{"from_entry_id": w[1].ID})
	mustResponse(t, r, protocol.TypeSessionOp)
	d := decodeData[forkData](t, r)
	forkDir := filepath.Join(dir, forksDirName, d.ForkID)
	for _, sd := range []string{dir, forkDir} {
		got, err := images.Open(sd).Get(b.SHA256)
		if err != nil || got != testImage() {
			t.Fatalf("%s: image %+v, %v", sd, got, err)
		}
	}
	rows := readEntriesAt(t, filepath.Join(forkDir, sessionFileName))
	if rows[1].Content[0].SHA256 != b.SHA256 {
		t.Fatalf("fork's first message %+v", rows[1])
	}
	if _, err := os.Stat(filepath.Join(forkDir, images.DirName, b.SHA256+".png")); err != nil {
		t.Fatal(err)
	}
}

// TestTextOnlyPerProvider: a provider's TextOnlyModels hold for that
// provider only. The same sim model on two providers: on the one naming
// it, hello and sync lack image-input and a prompt with images is refused
// UNSUPPORTED; a set_model to the other announces image-input in
// model_changed and takes the image.
func TestTextOnlyPerProvider(t *testing.T) {
	h := start(t, func(o *Options) {
		o.Providers = []ProviderSpec{
			{Name: "blind", Kind: providerSim, TextOnlyModels: []string{"sim"}},
			{Name: "seeing", Kind: providerSim},
		}
	})
	hello, sync := h.handshake()
	for _, caps := range [][]string{hello.Capabilities, sync.Capabilities} {
		if slices.Contains(caps, protocol.CapImageInput) {
			t.Fatalf("blind/sim offers %s: %v", protocol.CapImageInput, caps)
		}
	}
	h.send(protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: "p1"}, Message: "look", Images: []protocol.Image{testImage()}})
	r, _ := h.response("p1")
	mustErrorResponse(t, r, protocol.CodeUnsupported, "")

	// blind/sim-think is not named: it takes images.
	for _, step := range []struct {
		model string
		want  bool
	}{{"blind/sim-think", true}, {"blind/sim", false}, {"seeing/sim", true}, {"blind/sim", false}} {
		id := h.id("sm")
		h.send(protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: id}, Model: step.model})
		r, before := h.response(id)
		mustResponse(t, r, protocol.TypeSetModel)
		ch := one[*protocol.ModelChanged](t, before)
		if got := slices.Contains(ch.Capabilities, protocol.CapImageInput); got != step.want {
			t.Fatalf("model_changed to %s: capabilities %v, image-input %v, want %v", step.model, ch.Capabilities, got, step.want)
		}
	}
	h.send(protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, ID: "sm-seeing"}, Model: "seeing/sim"})
	h.response("sm-seeing")
	h.send(protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: "p2"}, Message: "look", Images: []protocol.Image{testImage()}})
	r, _ = h.response("p2")
	mustResponse(t, r, protocol.TypePrompt)
	evs := h.untilIdle()
	if mcs := of[*protocol.MessageComplete](evs); len(mcs) != 1 || !strings.Contains(textOf(mcs[0].Message), "[image image/png, 12 bytes]") {
		t.Fatalf("seeing/sim's answer: %v", types(evs))
	}
}
