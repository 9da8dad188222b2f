package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/runtime/adapter"
)

// client is the ACP client side the agent calls: session/update and
// session/request_permission through the translator and the Host's
// permission gate, fs/read_text_file and fs/write_text_file confined to
// the agent's cwd (a write asks permission first), and terminal/*
// (terminal.go: every command asks permission first).
type client struct{ b *Backend }

var _ sdk.Client = (*client)(nil)

func (c *client) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	c.b.tr.Update(n.Update)
	return nil
}

// begin counts one request of the agent, which the SDK answers from a
// goroutine of its own, as the backend's until end is called (Close
// waits for it); once Close began the request is refused: the agent is
// gone.
func (c *client) begin() (end func(), err error) {
	end, ok := c.b.calls.Begin()
	if !ok {
		return nil, sdk.NewInternalError(map[string]string{"error": "the adapter is closing"})
	}
	return end, nil
}

func (c *client) RequestPermission(ctx context.Context, req sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	end, err := c.begin()
	if err != nil {
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	defer end()
	return RequestPermission(ctx, c.b.tr, c.b.ev, req), nil
}

// MetaReason is the _meta key of a permission answer that carries the
// person's reason (permission_response.reason).
const MetaReason = "shard.dev/reason"

// RequestPermission translates session/request_permission: the call
// (merged into the translator's state) and the agent's options go to
// ev.Ask; its answer is the selected option, or cancelled.
func RequestPermission(ctx context.Context, tr *Translator, ev adapter.Events, req sdk.RequestPermissionRequest) sdk.RequestPermissionResponse {
	ask := adapter.Ask{Tool: tr.Merge(req.ToolCall)}
	for _, o := range req.Options {
		ask.Options = append(ask.Options, adapter.Option{ID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	ans := ev.Ask(ctx, ask)
	var meta map[string]any
	if ans.Reason != "" {
		// ACP has no field for the person's reason: it rides in _meta
		// (docs/protocol.md Appendix A), which an agent may ignore.
		meta = map[string]any{MetaReason: ans.Reason}
	}
	if ans.Cancelled || ans.OptionID == "" {
		return sdk.RequestPermissionResponse{Meta: meta, Outcome: sdk.NewRequestPermissionOutcomeCancelled()}
	}
	return sdk.RequestPermissionResponse{Meta: meta, Outcome: sdk.NewRequestPermissionOutcomeSelected(sdk.PermissionOptionId(ans.OptionID))}
}

// confine resolves p (absolute, as ACP requires, or relative to the cwd)
// and refuses anything outside the agent's cwd, symlinks included.
func (c *client) confine(p string) (string, error) {
	root, err := filepath.EvalSymlinks(c.b.opts.Cwd)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.b.opts.Cwd, p)
	}
	p = filepath.Clean(p)
	// Resolve the deepest existing ancestor: a file being created does
	// not exist yet. A name that exists but does not resolve (a dangling
	// or looping symlink) is refused: writing through it would create its
	// target, wherever that is.
	dir, rest := p, ""
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			p = filepath.Join(r, rest)
			break
		}
		if _, err := os.Lstat(dir); err == nil {
			return "", errOutside()
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
	if p != root && !strings.HasPrefix(p, root+string(filepath.Separator)) {
		return "", errOutside()
	}
	return p, nil
}

// errOutside is the refusal of a path outside the agent's cwd (ACP
// invalid params), a new one each time: the SDK's error is mutable.
func errOutside() error {
	return sdk.NewInvalidParams(map[string]string{"path": "outside the agent's working directory"})
}

func (c *client) ReadTextFile(_ context.Context, req sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	end, err := c.begin()
	if err != nil {
		return sdk.ReadTextFileResponse{}, err
	}
	defer end()
	p, err := c.confine(req.Path)
	if err != nil {
		return sdk.ReadTextFileResponse{}, err
	}
	data, err := readNoFollow(p)
	if err != nil {
		return sdk.ReadTextFileResponse{}, sdk.NewInternalError(map[string]string{"error": fmt.Sprint(errors.Unwrap(err))})
	}
	text := string(data)
	if req.Line != nil || req.Limit != nil {
		lines := strings.SplitAfter(text, "\n")
		start := 0
		if req.Line != nil && *req.Line > 1 {
			start = min(*req.Line-1, len(lines))
		}
		end := len(lines)
		if req.Limit != nil && *req.Limit >= 0 {
			end = min(start+*req.Limit, len(lines))
		}
		text = strings.Join(lines[start:end], "")
	}
	return sdk.ReadTextFileResponse{Content: text}, nil
}

func (c *client) WriteTextFile(ctx context.Context, req sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	end, err := c.begin()
	if err != nil {
		return sdk.WriteTextFileResponse{}, err
	}
	defer end()
	p, err := c.confine(req.Path)
	if err != nil {
		return sdk.WriteTextFileResponse{}, err
	}
	old, _ := os.ReadFile(p)
	ans := c.b.ev.Ask(ctx, adapter.Ask{
		Tool: adapter.Tool{ID: "fs-write", Name: "write", Title: "Write " + req.Path, Args: map[string]any{"path": req.Path},
			Diffs: []adapter.Diff{{Path: req.Path, Old: string(old), New: req.Content}}},
		Options: []adapter.Option{{ID: "allow", Name: "Allow", Kind: adapter.AllowOnce}, {ID: "deny", Name: "Deny", Kind: adapter.RejectOnce}},
	})
	if ans.Cancelled || ans.OptionID != "allow" {
		return sdk.WriteTextFileResponse{}, &sdk.RequestError{Code: -32000, Message: "permission denied"}
	}
	if err := writeNoFollow(p, []byte(req.Content)); err != nil {
		return sdk.WriteTextFileResponse{}, sdk.NewInternalError(map[string]string{"error": fmt.Sprint(errors.Unwrap(err))})
	}
	return sdk.WriteTextFileResponse{}, nil
}

// readNoFollow and writeNoFollow open the confined path without following
// a symlink in its last element: confine resolved every symlink, so one
// there now was put there since (the ancestors are not re-checked: see
// the README's limits).
func readNoFollow(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func writeNoFollow(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
