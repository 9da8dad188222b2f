package tools

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sniffLen is how much of a file the binary check looks at (git's rule:
// a NUL byte in the first 8000 bytes makes a file binary).
const sniffLen = 8000

// cwd returns env's working directory as an absolute, clean path.
func (e Env) cwd() (string, error) {
	if e.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("working directory: %w", err)
		}
		return wd, nil
	}
	abs, err := filepath.Abs(e.Cwd)
	if err != nil {
		return "", fmt.Errorf("working directory %q: %w", e.Cwd, err)
	}
	return abs, nil
}

// resolve makes the path argument p absolute and clean: relative paths are
// joined to the working directory, "~" and "~/…" are the user's home.
func (e Env) resolve(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("expand %q: %w", p, err)
		}
		return filepath.Join(home, p[1:]), nil
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	wd, err := e.cwd()
	if err != nil {
		return "", err
	}
	return filepath.Join(wd, p), nil
}

// display is how an absolute path is shown: relative to the working
// directory when it lies under it ("." for the directory itself),
// absolute otherwise. It always uses forward slashes.
func (e Env) display(abs string) string {
	wd, err := e.cwd()
	if err != nil {
		return filepath.ToSlash(abs)
	}
	rel, err := filepath.Rel(wd, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(abs)
	}
	return filepath.ToSlash(rel)
}

// isBinary reports whether the start of a file marks it as binary.
func isBinary(head []byte) bool {
	return bytes.IndexByte(head, 0) >= 0
}

// skipDir reports whether a directory walk skips a directory of this name.
func skipDir(name string) bool {
	return name == ".git"
}

// pathError strips the *os.PathError wrapper, whose path is the resolved
// absolute one, so messages name the path as the caller gave it.
func pathError(shown string, err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s: %v", shown, pe.Err)
	}
	return err.Error()
}
