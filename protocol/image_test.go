package protocol_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// pngHead is the PNG signature, the smallest data a PNG image check takes.
var pngHead = []byte("\x89PNG\r\n\x1a\n")

func promptWith(im protocol.Image) *protocol.Prompt {
	return &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt}, Images: []protocol.Image{im}}
}

// TestImageValidate: a prompt's image is refused, naming the field, unless
// it is a base64 image of an accepted type whose bytes start as that type
// says, at most MaxImageBytes.
func TestImageValidate(t *testing.T) {
	t.Parallel()
	b64 := base64.StdEncoding.EncodeToString
	webp := append([]byte("RIFF\x00\x00\x00\x00WEBPVP8 "), 0)
	for _, tc := range []struct {
		name    string
		im      protocol.Image
		wantErr string
	}{
		{"png", protocol.Image{Type: "image", MimeType: "image/png", Data: b64(pngHead)}, ""},
		{"jpeg", protocol.Image{Type: "image", MimeType: "image/jpeg", Data: b64([]byte{0xff, 0xd8, 0xff, 0xe0, 1})}, ""},
		{"gif", protocol.Image{Type: "image", MimeType: "image/gif", Data: b64([]byte("GIF89a..."))}, ""},
		{"webp", protocol.Image{Type: "image", MimeType: "image/webp", Data: b64(webp)}, ""},
		{"wrong type", protocol.Image{Type: "picture", MimeType: "image/png", Data: b64(pngHead)}, `field "images[0].type": must be "image"`},
		{"svg", protocol.Image{Type: "image", MimeType: "image/svg+xml", Data: b64([]byte("<svg/>"))}, `field "images[0].mime_type": must be one of`},
		{"no data", protocol.Image{Type: "image", MimeType: "image/png"}, `field "images[0].data": required`},
		{"data url", protocol.Image{Type: "image", MimeType: "image/png", Data: "data:image/png;base64," + b64(pngHead)}, `field "images[0].data": must be standard base64`},
		{"whitespace", protocol.Image{Type: "image", MimeType: "image/png", Data: b64(pngHead) + "\n"}, `must be standard base64`},
		{"unpadded", protocol.Image{Type: "image", MimeType: "image/png", Data: strings.TrimRight(b64(pngHead), "=")}, `must be standard base64`},
		{"url alphabet", protocol.Image{Type: "image", MimeType: "image/png", Data: "iVBORw0K_go="}, `must be standard base64`},
		{"mime lies", protocol.Image{Type: "image", MimeType: "image/jpeg", Data: b64(pngHead)}, `field "images[0].data": is not a image/jpeg image`},
	} {
		err := promptWith(tc.im).Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
		case err != nil && protocol.AsError(err).Code != protocol.CodeInvalidRequest:
			t.Errorf("%s: code %s", tc.name, protocol.AsError(err).Code)
		}
	}
}

// TestImageSizeLimit: an image of MaxImageBytes is accepted, one byte more
// is INVALID_REQUEST with LimitData naming images[i].data, in prompt and in
// steer alike.
func TestImageSizeLimit(t *testing.T) {
	t.Parallel()
	at := append(bytes.Clone(pngHead), make([]byte, protocol.MaxImageBytes-len(pngHead))...)
	im := protocol.Image{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(at)}
	if err := promptWith(im).Validate(); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	over := protocol.Image{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(append(at, 0))}
	for _, cmd := range []protocol.Command{
		promptWith(over),
		&protocol.Steer{Header: protocol.Header{Type: protocol.TypeSteer}, Message: "m", Images: []protocol.Image{im, over}},
	} {
		err := cmd.Validate()
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidRequest {
			t.Fatalf("over the limit: %v", err)
		}
		d, ok := pe.Data.(protocol.LimitData)
		if !ok || !strings.HasSuffix(d.Field, "].data") || d.Limit != protocol.MaxImageBytes || d.Unit != protocol.UnitBytes {
			t.Errorf("data = %#v", pe.Data)
		}
	}
	huge := protocol.Image{Type: "image", MimeType: "image/png", Data: strings.Repeat("A", 8<<20)}
	if err := promptWith(huge).Validate(); err == nil || !strings.Contains(err.Error(), "limit 5242880 bytes") {
		t.Errorf("huge: %v", err)
	}
}

// TestDecodeImageAndGetImage: DecodeImage returns the bytes of a valid
// image; get_image needs a lower-case hex SHA-256.
func TestDecodeImageAndGetImage(t *testing.T) {
	t.Parallel()
	b, err := protocol.DecodeImage(protocol.Image{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(pngHead)})
	if err != nil || !bytes.Equal(b, pngHead) {
		t.Fatalf("DecodeImage = %q, %v", b, err)
	}
	ok := strings.Repeat("ab", 32)
	if _, _, err := protocol.DecodeCommand([]byte(`{"type":"get_image","sha256":"` + ok + `"}`)); err != nil {
		t.Errorf("get_image: %v", err)
	}
	for _, bad := range []string{"", strings.ToUpper(ok), ok[:63], ok + "0", "../" + ok[3:]} {
		if _, _, err := protocol.DecodeCommand([]byte(`{"type":"get_image","sha256":"` + bad + `"}`)); err == nil {
			t.Errorf("get_image %q accepted", bad)
		}
	}
	if protocol.CommandScope(protocol.TypeGetImage) != protocol.ScopeAgent {
		t.Error("get_image is not per-agent")
	}
}

// FuzzImageData: whatever the data, the check never panics, and data it
// accepts decodes as standard base64 to an image of at most MaxImageBytes
// that starts as its type says.
func FuzzImageData(f *testing.F) {
	for _, s := range []string{"iVBORw0KGgo=", "/9j/4AAQ", "R0lGODlh", "UklGRgAAAABXRUJQ", "====", "A===", "AA==", "iVBORw0KGgo", ""} {
		f.Add(s, "image/png")
		f.Add(s, "image/jpeg")
	}
	f.Fuzz(func(t *testing.T, data, mime string) {
		im := protocol.Image{Type: "image", MimeType: mime, Data: data}
		b, err := protocol.DecodeImage(im)
		if err != nil {
			if promptWith(im).Validate() == nil {
				t.Fatalf("prompt accepts what DecodeImage refuses: %v", err)
			}
			return
		}
		want, derr := base64.StdEncoding.DecodeString(data)
		if derr != nil || !bytes.Equal(b, want) || len(b) > protocol.MaxImageBytes || len(b) == 0 {
			t.Fatalf("accepted %q: %d bytes, %v", data, len(b), derr)
		}
		if protocol.ImageExt(mime) == "" {
			t.Fatalf("accepted MIME type %q", mime)
		}
	})
}
