package provider

import (
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// imageTurn is a user message with an image with its data, one without
// (sent as text), and text.
func imageTurn() []protocol.Message {
	return []protocol.Message{{ID: "u1", Role: "user", Content: []protocol.ContentBlock{
		{Type: protocol.BlockImage, MimeType: protocol.MIMEPNG, SHA256: "x", Size: 8, Data: "iVBORw0KGgo="},
		{Type: protocol.BlockImage, MimeType: protocol.MIMEJPEG, SHA256: "y", Size: 3},
		{Type: protocol.BlockText, Text: "compare"},
	}}}
}

// TestImagesOnTheWire: each provider sends a user message's images in its
// format, in the message's order: chat completions as image_url parts with
// a data: URL, Messages as image blocks with a base64 source; an image
// block without data is a line of text saying an image was there.
func TestImagesOnTheWire(t *testing.T) {
	for _, tc := range []struct{ name, suffix string }{{NameOpenAI, "/v1"}, {NameAnthropic, ""}} {
		f := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn { return fakellm.Turn{Text: "ok"} }))
		p := testProvider(t, f, tc.name, tc.suffix)
		s, err := p.Stream(background(t), Request{Messages: imageTurn()})
		if err != nil {
			t.Fatal(err)
		}
		mustRead(t, s)
		body := f.Only(t).Body
		user := fakellm.Get(t, body, "messages", 0)
		switch tc.name {
		case NameOpenAI:
			if fakellm.Get(t, user, "content", 0, "type") != "image_url" ||
				fakellm.Get(t, user, "content", 0, "image_url", "url") != "data:image/png;base64,iVBORw0KGgo=" ||
				fakellm.Get(t, user, "content", 1, "text") != "[an image (image/jpeg) was attached here]" ||
				fakellm.Get(t, user, "content", 2, "text") != "compare" {
				t.Errorf("openai user message = %s", asJSON(t, user))
			}
		case NameAnthropic:
			if fakellm.Get(t, user, "content", 0, "type") != "image" ||
				fakellm.Get(t, user, "content", 0, "source", "type") != "base64" ||
				fakellm.Get(t, user, "content", 0, "source", "media_type") != "image/png" ||
				fakellm.Get(t, user, "content", 0, "source", "data") != "iVBORw0KGgo=" ||
				fakellm.Get(t, user, "content", 1, "text") != "[an image (image/jpeg) was attached here]" ||
				fakellm.Get(t, user, "content", 2, "text") != "compare" {
				t.Errorf("anthropic user message = %s", asJSON(t, user))
			}
		}
	}
}

// TestOpenAIImageWithoutDataIsText: a user message whose only image has no
// data goes as a plain string, as a text-only message does.
func TestOpenAIImageWithoutDataIsText(t *testing.T) {
	msgs, err := openaiMessages(protocol.Message{ID: "u", Role: "user", Content: []protocol.ContentBlock{
		{Type: protocol.BlockText, Text: "see"}, {Type: protocol.BlockImage, MimeType: protocol.MIMEGIF}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].OfUser == nil || msgs[0].OfUser.Content.OfString.Value != "see\n\n[an image (image/gif) was attached here]" {
		t.Fatalf("messages = %+v", msgs)
	}
}
