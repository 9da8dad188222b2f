package images_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/images"
)

var png = append([]byte("\x89PNG\r\n\x1a\n"), "body"...)

func image() protocol.Image {
	return protocol.Image{Type: protocol.ImageType, MimeType: protocol.MIMEPNG, Data: base64.StdEncoding.EncodeToString(png)}
}

// TestStorePutGet: an image is stored once under its hash, read back as
// the Image it was, and a file whose bytes changed is SESSION_CORRUPT; an
// unknown hash is NOT_FOUND; a bad image is refused INVALID_REQUEST.
func TestStorePutGet(t *testing.T) {
	dir := t.TempDir()
	s := images.Open(dir)
	b, err := s.Put(image())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(image()); err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir(filepath.Join(dir, images.DirName))
	if len(files) != 1 || files[0].Name() != b.SHA256+".png" || b.Size != int64(len(png)) || b.Type != protocol.BlockImage {
		t.Fatalf("files %v, block %+v", files, b)
	}
	if got, err := images.Open(dir).Get(b.SHA256); err != nil || got != image() {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := s.Get(strings.Repeat("a", 64)); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("unknown: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, images.DirName, b.SHA256+".png"), []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(b.SHA256); protocol.CodeOf(err) != protocol.CodeSessionCorrupt {
		t.Fatalf("changed file: %v", err)
	}
	if _, err := s.Put(protocol.Image{Type: "image", MimeType: protocol.MIMEGIF, Data: image().Data}); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("a PNG called GIF: %v", err)
	}
}

// TestInlineAndTextOnly: Inline fills the data of image blocks without
// touching the messages it was given; TextOnly names each image in text;
// a missing image becomes text too.
func TestInlineAndTextOnly(t *testing.T) {
	s := images.Open("")
	b, err := s.Put(image())
	if err != nil {
		t.Fatal(err)
	}
	missing := b
	missing.SHA256 = strings.Repeat("0", 64)
	msgs := []protocol.Message{
		{ID: "1", Role: "user", Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: "plain"}}},
		{ID: "2", Role: "user", Content: []protocol.ContentBlock{b, missing, {Type: protocol.BlockText, Text: "look"}}},
	}
	in := s.Inline(msgs)
	if in[1].Content[0].Data != image().Data || in[1].Content[1].Type != protocol.BlockText || msgs[1].Content[0].Data != "" {
		t.Fatalf("inline %+v (source %+v)", in[1], msgs[1])
	}
	to := images.TextOnly(msgs)
	if to[1].Content[0].Type != protocol.BlockText || !strings.Contains(to[1].Content[0].Text, "does not take images") || msgs[1].Content[0].Type != protocol.BlockImage {
		t.Fatalf("text only %+v", to[1])
	}
}
