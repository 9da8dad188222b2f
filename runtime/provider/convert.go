package provider

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/shard-dev/shard/protocol"
)

// Message roles of the wire protocol.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
)

// toolResultText is the text a model sees for a tool_result block: the text
// output, the JSON value, or the error message. A failed result whose text
// does not say so is prefixed with "Error: " for services without an error
// flag (withErrorPrefix).
func toolResultText(b protocol.ContentBlock, withErrorPrefix bool) string {
	var text string
	if c := b.Content; c != nil {
		switch c.Kind {
		case "json":
			raw, err := json.Marshal(c.Value)
			if err != nil {
				text = fmt.Sprint(c.Value)
			} else {
				text = string(raw)
			}
		case "error":
			text = c.Message
			if withErrorPrefix {
				return "Error: " + text
			}
		default:
			text = c.Text
		}
	}
	if withErrorPrefix && b.IsError {
		return "Error: " + text
	}
	return text
}

// toolArgsJSON is the JSON text of a tool_call block's arguments ("{}" when
// it has none).
func toolArgsJSON(b protocol.ContentBlock) (string, error) {
	if len(b.Args) == 0 {
		return "{}", nil
	}
	raw, err := json.Marshal(b.Args)
	if err != nil {
		return "", fmt.Errorf("%w: arguments of tool call %q: %w", ErrInvalidRequest, b.ID, err)
	}
	return string(raw), nil
}

// toolArgs is a tool_call block's arguments as a JSON object value.
func toolArgs(b protocol.ContentBlock) map[string]any {
	if b.Args == nil {
		return map[string]any{}
	}
	return b.Args
}

// schemaObject decodes a tool's JSON schema, which must be an object. An
// empty schema is an object schema without properties.
func schemaObject(t ToolSpec) (map[string]any, error) {
	raw := bytes.TrimSpace(t.Schema)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: schema of tool %q is not a JSON object: %w", ErrInvalidRequest, t.Name, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: schema of tool %q is not a JSON object", ErrInvalidRequest, t.Name)
	}
	return m, nil
}

// newToolCallID makes an id for a tool call whose server sent none.
func newToolCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return "call_" + hex.EncodeToString(b[:])
}

// blockIndexer numbers the content blocks of an answer densely in the order
// their first event arrives, whatever the service calls them.
type blockIndexer struct {
	next  int
	byKey map[int]int
}

// index returns the block index for the service's block key, assigning the
// next one on first use.
func (x *blockIndexer) index(key int) int {
	if i, ok := x.byKey[key]; ok {
		return i
	}
	if x.byKey == nil {
		x.byKey = make(map[int]int)
	}
	i := x.next
	x.next++
	x.byKey[key] = i
	return i
}

// usageWithContext fills ContextTokens: everything the call consumed and
// produced.
func usageWithContext(u protocol.Usage) *protocol.Usage {
	u.ContextTokens = u.Input + u.CacheRead + u.CacheWrite + u.Output
	return &u
}

// dataURL is the data: URL of an image block with its base64 data, as
// OpenAI-compatible servers take images.
func dataURL(b protocol.ContentBlock) string {
	return "data:" + b.MimeType + ";base64," + b.Data
}

// imagePlaceholder is the text sent for an image block without its data
// (the caller did not fill it in): the model hears that an image was
// there rather than nothing.
func imagePlaceholder(b protocol.ContentBlock) string {
	return fmt.Sprintf("[an image (%s) was attached here]", b.MimeType)
}
