package images

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/shard-dev/shard/protocol"
)

// DirName is the directory of a session's images, inside its session
// directory.
const DirName = "images"

// exts are the file extensions of the accepted MIME types, in the order
// Get tries them.
var exts = []string{"png", "jpg", "gif", "webp"}

// mimeOf is the MIME type of a stored file's extension.
func mimeOf(ext string) string {
	for _, m := range []string{protocol.MIMEPNG, protocol.MIMEJPEG, protocol.MIMEGIF, protocol.MIMEWebP} {
		if protocol.ImageExt(m) == ext {
			return m
		}
	}
	return ""
}

// Store is the images of one session. Without a session directory it keeps
// them in memory for the life of the process (a runtime run by hand). Its
// methods are safe for concurrent use; they do file I/O, so a runtime
// calls them without its state lock.
type Store struct {
	dir string // <session>/images; "" keeps images in mem

	// mu protects the following.
	mu  sync.Mutex
	mem map[string]protocol.Image // by SHA-256, when dir == ""
}

// Of returns the images a prompt or steer carries; nil for any other
// command. The reference runtime and the adapter host store these before
// the command is handled.
func Of(cmd protocol.Command) []protocol.Image {
	switch c := cmd.(type) {
	case *protocol.Prompt:
		return c.Images
	case *protocol.Steer:
		return c.Images
	}
	return nil
}

// Open returns the store of the session in sessionDir ("" for one kept in
// memory). The directory is made by the first Put.
func Open(sessionDir string) *Store {
	s := &Store{mem: map[string]protocol.Image{}}
	if sessionDir != "" {
		s.dir = filepath.Join(sessionDir, DirName)
	}
	return s
}

// Block is the image content block that names an image of data with MIME
// type mime.
func Block(mime string, data []byte) protocol.ContentBlock {
	sum := sha256.Sum256(data)
	return protocol.ContentBlock{Type: protocol.BlockImage, MimeType: mime, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

// Put checks im (protocol.DecodeImage) and stores it durably: the file is
// written, synced and renamed into place, and the directory synced, before
// Put returns the block naming it. An image already stored is not written
// again. A refused image is an INVALID_REQUEST protocol error.
func (s *Store) Put(im protocol.Image) (protocol.ContentBlock, error) {
	data, err := protocol.DecodeImage(im)
	if err != nil {
		return protocol.ContentBlock{}, err
	}
	b := Block(im.MimeType, data)
	if s.dir == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.mem[b.SHA256] = protocol.Image{Type: protocol.ImageType, MimeType: im.MimeType, Data: im.Data}
		return b, nil
	}
	if err := s.write(b, data); err != nil {
		return protocol.ContentBlock{}, err
	}
	return b, nil
}

// path is the file of block b.
func (s *Store) path(b protocol.ContentBlock) string {
	return filepath.Join(s.dir, b.SHA256+"."+protocol.ImageExt(b.MimeType))
}

// write stores data as b's file unless it is there already.
func (s *Store) write(b protocol.ContentBlock, data []byte) error {
	final := s.path(b)
	if st, err := os.Stat(final); err == nil && st.Size() == b.Size {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	f, err := os.CreateTemp(s.dir, b.SHA256+".tmp-*")
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), final)
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("images: store %s: %w", b.SHA256, werr)
	}
	syncDir(s.dir)
	syncDir(filepath.Dir(s.dir))
	return nil
}

// Get returns the image stored under sha as the protocol's Image (base64
// data): NOT_FOUND when the session holds none, SESSION_CORRUPT when its
// file no longer has that hash.
func (s *Store) Get(sha string) (protocol.Image, error) {
	if !protocol.ValidSHA256(sha) {
		return protocol.Image{}, protocol.Errorf(protocol.CodeNotFound, "no image %q", sha)
	}
	if s.dir == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		if im, ok := s.mem[sha]; ok {
			return im, nil
		}
		return protocol.Image{}, protocol.Errorf(protocol.CodeNotFound, "no image %s in this session", sha)
	}
	for _, ext := range exts {
		data, err := os.ReadFile(filepath.Join(s.dir, sha+"."+ext))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return protocol.Image{}, fmt.Errorf("%w: %w", protocol.Errorf(protocol.CodeInternal, "image %s cannot be read", sha), err)
		}
		if Block("", data).SHA256 != sha {
			return protocol.Image{}, protocol.Errorf(protocol.CodeSessionCorrupt, "image %s does not match its hash", sha)
		}
		return protocol.Image{Type: protocol.ImageType, MimeType: mimeOf(ext), Data: base64.StdEncoding.EncodeToString(data)}, nil
	}
	return protocol.Image{}, protocol.Errorf(protocol.CodeNotFound, "no image %s in this session", sha)
}

// Inline returns msgs with the base64 data of every image block filled in
// from the store, for a provider call; msgs are not changed (a message with
// images is copied). An image the store cannot give becomes a text block
// saying so, so that the model still hears that an image was there.
func (s *Store) Inline(msgs []protocol.Message) []protocol.Message {
	return s.mapImages(msgs, func(b protocol.ContentBlock) protocol.ContentBlock {
		im, err := s.Get(b.SHA256)
		if err != nil {
			return protocol.ContentBlock{Type: protocol.BlockText, Text: fmt.Sprintf("[an image (%s) was attached here; it can no longer be read]", b.MimeType)}
		}
		b.Data = im.Data
		return b
	})
}

// TextOnly returns msgs with every image block replaced by a text block
// saying an image was there, for a model that takes no images.
func TextOnly(msgs []protocol.Message) []protocol.Message {
	return (*Store)(nil).mapImages(msgs, func(b protocol.ContentBlock) protocol.ContentBlock {
		return protocol.ContentBlock{Type: protocol.BlockText, Text: fmt.Sprintf("[an image (%s) was attached here; the model in use does not take images]", b.MimeType)}
	})
}

// mapImages returns msgs with f applied to each image block, copying only
// the messages that have one.
func (*Store) mapImages(msgs []protocol.Message, f func(protocol.ContentBlock) protocol.ContentBlock) []protocol.Message {
	var out []protocol.Message
	for i, m := range msgs {
		var content []protocol.ContentBlock
		for j, b := range m.Content {
			if b.Type != protocol.BlockImage {
				continue
			}
			if content == nil {
				content = append([]protocol.ContentBlock(nil), m.Content...)
			}
			content[j] = f(b)
		}
		if content == nil {
			continue
		}
		if out == nil {
			out = append([]protocol.Message(nil), msgs...)
		}
		out[i].Content = content
	}
	if out == nil {
		return msgs
	}
	return out
}

// CopyTo makes the images that blocks name available to the session in
// dstSessionDir (a fork): each file is hard-linked, or copied where a link
// cannot be made. Blocks of other types are ignored.
func (s *Store) CopyTo(dstSessionDir string, blocks []protocol.ContentBlock) error {
	if s.dir == "" || dstSessionDir == "" {
		return nil
	}
	dst := Open(dstSessionDir)
	for _, b := range blocks {
		if b.Type != protocol.BlockImage || !protocol.ValidSHA256(b.SHA256) || protocol.ImageExt(b.MimeType) == "" {
			continue
		}
		if err := os.MkdirAll(dst.dir, 0o700); err != nil {
			return fmt.Errorf("images: %w", err)
		}
		if err := os.Link(s.path(b), dst.path(b)); err == nil || errors.Is(err, fs.ErrExist) {
			continue
		}
		data, err := os.ReadFile(s.path(b))
		if errors.Is(err, fs.ErrNotExist) {
			continue // nothing to copy: the fork reads it as missing, as the source does
		}
		if err != nil {
			return fmt.Errorf("images: %w", err)
		}
		if err := dst.write(b, data); err != nil {
			return err
		}
	}
	syncDir(dst.dir)
	return nil
}

// syncDir makes the names in dir durable; errors are ignored (some file
// systems do not support syncing a directory).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
