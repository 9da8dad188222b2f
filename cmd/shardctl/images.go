package main

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"

	"github.com/shard-dev/shard/protocol"
)

// readImage reads the image file at path as a prompt's Image: its type is
// what its bytes are (PNG, JPEG, GIF or WebP, whatever the file is
// called), and it must be at most protocol.MaxImageBytes, the limit the
// daemon enforces (docs/protocol.md §13 P4), so a file that will not go is
// refused before anything is sent.
func readImage(path string) (protocol.Image, error) {
	st, err := os.Stat(path)
	if err != nil {
		return protocol.Image{}, fmt.Errorf("image %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return protocol.Image{}, fmt.Errorf("image %s: not a regular file", path)
	}
	if st.Size() > protocol.MaxImageBytes {
		return protocol.Image{}, fmt.Errorf("image %s: %d bytes, limit %d bytes", path, st.Size(), protocol.MaxImageBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return protocol.Image{}, fmt.Errorf("image %s: %w", path, err)
	}
	mime := http.DetectContentType(data)
	if protocol.ImageExt(mime) == "" {
		return protocol.Image{}, fmt.Errorf("image %s: %s is not a PNG, JPEG, GIF or WebP image", path, mime)
	}
	im := protocol.Image{Type: protocol.ImageType, MimeType: mime, Data: base64.StdEncoding.EncodeToString(data)}
	if _, err := protocol.DecodeImage(im); err != nil {
		return protocol.Image{}, fmt.Errorf("image %s: %w", path, err)
	}
	return im, nil
}

// readImages reads each path with readImage, at most protocol.MaxImages.
func readImages(paths []string) ([]protocol.Image, error) {
	if len(paths) > protocol.MaxImages {
		return nil, fmt.Errorf("%d images, limit %d", len(paths), protocol.MaxImages)
	}
	var out []protocol.Image
	for _, p := range paths {
		im, err := readImage(p)
		if err != nil {
			return nil, err
		}
		out = append(out, im)
	}
	return out, nil
}
