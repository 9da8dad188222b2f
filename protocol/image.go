package protocol

import (
	"bytes"
	"encoding/base64"
	"fmt"
)

// Images (docs/protocol.md §11 Image, §13 P4).
//
// A client sends an image inline, as the base64 data of an Image in prompt
// or steer. Shard's choice for P4: the runtime keeps its bytes once, in a
// file named by their SHA-256 beside the session transcript, and every
// message that shows the image afterwards (the live window of sync, the
// transcript, a fork) carries an image content block that names the file:
// {type:"image", mime_type, sha256, size}, never the data. The bytes are
// fetched with get_image (a per-agent extension), which answers the Image
// shape. So a sync stays small however many images the conversation holds
// (it is one record, and the outbound queue of a connection is bounded),
// while a client still gets every image, for a thumbnail or in full.
const (
	// ImageType is Image.Type: "image".
	ImageType = "image"

	// BlockImage is the content block of an image in a message: MimeType,
	// SHA256 and Size name the stored file (Data is empty on the wire).
	BlockImage = "image"

	// MaxImageBytes bounds one image, decoded: 5 MiB, the per-image limit
	// of the Anthropic Messages API (OpenAI's is larger), so an image the
	// daemon accepts is one every provider takes. Its base64 is 6.7 MiB, so
	// a get_image answer fits a connection's default outbound queue (8 MiB)
	// and four of them fit one record (32 MiB), which bounds the total of a
	// prompt's images.
	MaxImageBytes = 5 << 20

	// CapImageInput is the runtime capability (sync, hello, model_changed
	// capabilities) saying that a prompt or steer may carry images: the
	// active model (or the third-party agent) takes them. Without it a
	// prompt with images is refused UNSUPPORTED, never run without them.
	CapImageInput = "image-input"
)

// The image MIME types accepted: those both OpenAI-compatible servers and
// Anthropic take.
const (
	MIMEPNG  = "image/png"
	MIMEJPEG = "image/jpeg"
	MIMEGIF  = "image/gif"
	MIMEWebP = "image/webp"
)

// ImageExt is the file extension ("png", "jpg", "gif", "webp") of an
// accepted image MIME type, "" for any other.
func ImageExt(mime string) string {
	switch mime {
	case MIMEPNG:
		return "png"
	case MIMEJPEG:
		return "jpg"
	case MIMEGIF:
		return "gif"
	case MIMEWebP:
		return "webp"
	}
	return ""
}

// imageMagic reports whether head, the first bytes of an image, starts as
// an image of type mime does.
func imageMagic(mime string, head []byte) bool {
	switch mime {
	case MIMEPNG:
		return bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n"))
	case MIMEJPEG:
		return bytes.HasPrefix(head, []byte{0xff, 0xd8, 0xff})
	case MIMEGIF:
		return bytes.HasPrefix(head, []byte("GIF87a")) || bytes.HasPrefix(head, []byte("GIF89a"))
	case MIMEWebP:
		return len(head) >= 12 && bytes.Equal(head[:4], []byte("RIFF")) && bytes.Equal(head[8:12], []byte("WEBP"))
	}
	return false
}

// base64Len checks that s is standard, padded base64 without whitespace
// and returns the length of its decoding. It does not decode: the daemon
// checks every image of a prompt it forwards, and the runtime decodes it
// once to store it.
func base64Len(s string) (int, bool) {
	if len(s)%4 != 0 {
		return 0, false
	}
	pad := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
			if pad > 0 {
				return 0, false
			}
		case c == '=' && i >= len(s)-2:
			pad++
		default:
			return 0, false
		}
	}
	return len(s)/4*3 - pad, true
}

// checkImage validates one image of a prompt or steer (field is its JSON
// path, "images[0]"): type "image", an accepted MIME type, base64 data of
// at most MaxImageBytes whose first bytes are an image of that type. An
// image over the size limit is refused with LimitData, like every limit.
func checkImage(field string, im Image) error {
	if err := bounds(
		bound{field + ".type", im.Type, MaxNameLen},
		bound{field + ".mime_type", im.MimeType, MaxNameLen},
	); err != nil {
		return err
	}
	if im.Type != ImageType {
		return invalid(field+".type", `must be "image"`)
	}
	if ImageExt(im.MimeType) == "" {
		return invalid(field+".mime_type", "must be one of %s, %s, %s, %s", MIMEPNG, MIMEJPEG, MIMEGIF, MIMEWebP)
	}
	if im.Data == "" {
		return invalid(field+".data", "required")
	}
	if est := len(im.Data) / 4 * 3; est-2 > MaxImageBytes {
		// Refused before the scan: its length says enough.
		return overLimit(field+".data", est, MaxImageBytes, UnitBytes)
	}
	n, ok := base64Len(im.Data)
	if !ok {
		return invalid(field+".data", "must be standard base64 (padded, no whitespace, no data: prefix)")
	}
	if n > MaxImageBytes {
		return overLimit(field+".data", n, MaxImageBytes, UnitBytes)
	}
	head, _ := base64.StdEncoding.DecodeString(im.Data[:min(len(im.Data), 16)])
	if !imageMagic(im.MimeType, head) {
		return invalid(field+".data", "is not a %s image", im.MimeType)
	}
	return nil
}

// DecodeImage validates im as a prompt's image is validated and returns
// its bytes.
func DecodeImage(im Image) ([]byte, error) {
	if err := checkImage("image", im); err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(im.Data)
	if err != nil { // cannot happen after checkImage
		return nil, fmt.Errorf("%w: %w", Errorf(CodeInvalidRequest, "image data is not base64"), err)
	}
	return b, nil
}

// TypeGetImage is the per-agent command that fetches a stored image
// (docs/protocol.md §13 P4; a Shard extension, read-only).
const TypeGetImage = "get_image"

// GetImage asks for the image an image content block names. The response
// data is the Image (type, base64 data, mime_type); an image the session
// does not hold is NOT_FOUND.
type GetImage struct {
	Header
	SHA256 string `json:"sha256"`
}

// Validate implements Command.
func (c *GetImage) Validate() error {
	if err := maxLen("sha256", c.SHA256, MaxIDLen); err != nil {
		return err
	}
	if !ValidSHA256(c.SHA256) {
		return invalid("sha256", "must be 64 lower-case hex digits")
	}
	return nil
}

// ValidSHA256 reports whether s is a SHA-256 digest in lower-case hex, the
// form image content blocks carry (and their file names).
func ValidSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
