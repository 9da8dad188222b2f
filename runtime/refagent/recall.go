package refagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
	"github.com/shard-dev/shard/runtime/tools"
)

// toolRecall is the name of the recall tool. A compaction replaces a range
// of messages with a summary (docs/protocol.md §9.4 compaction
// message_range); the transcript on disk still holds them, and recall
// reads them back, so what the summary left out is not lost to the model.
const toolRecall = "recall"

// Bounds of one recall answer. A range can be most of a long session, so
// an answer holds at most maxRecall bytes of whole messages (a block cut at
// maxRecallBlock) and says which offset continues it.
const (
	maxRecall      = 32 << 10
	maxRecallBlock = 4 << 10
)

var recallSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "index": {"type": "integer", "minimum": 1, "description": "The compaction's number N, from the summary that starts with [compaction N]. Omitted: list the compactions of this session."},
    "offset": {"type": "integer", "minimum": 0, "description": "Skip this many messages of the range (to continue a long one). Default 0."}
  },
  "additionalProperties": false
}`)

const recallDescription = "Read back the messages a compaction summarized away. Earlier parts of this conversation " +
	"may have been replaced by a summary starting with [compaction N]; recall with index N returns the original " +
	"messages of that summary (long ranges in parts: pass the offset the answer names to continue)."

// recallTool reads the compacted ranges of the transcript at path ("": a
// session that is not persisted, whose compacted messages are gone).
func recallTool(path string) tool {
	return tool{
		name:     toolRecall,
		readOnly: true,
		spec:     provider.ToolSpec{Name: toolRecall, Description: recallDescription, Schema: recallSchema},
		check: func(args map[string]any) error {
			_, _, err := recallArgs(args)
			return err
		},
		ask: func(map[string]any) (string, []protocol.PermissionDetail) {
			return "Read back compacted messages", nil
		},
		run: func(_ context.Context, args map[string]any) toolOutput {
			index, offset, err := recallArgs(args)
			if err != nil {
				return errorOutput("%v", err)
			}
			if path == "" {
				return errorOutput("this session is not kept on disk: compacted messages cannot be read back")
			}
			entries, err := readTranscript(path)
			if err != nil {
				return errorOutput("the session transcript cannot be read: %v", err)
			}
			text, err := recallText(entries, index, offset)
			if err != nil {
				return errorOutput("%v", err)
			}
			return toolOutput{content: protocol.ToolResultContent{Kind: tools.ContentText, Text: text}}
		},
	}
}

// recallArgs reads index (0: list) and offset.
func recallArgs(args map[string]any) (index, offset int, err error) {
	num := func(key string, lo int) (int, error) {
		v, ok := args[key]
		if !ok {
			return 0, nil
		}
		var n int64
		switch x := v.(type) {
		case json.Number:
			n, err = strconv.ParseInt(string(x), 10, 64)
		case float64:
			n = int64(x)
			if float64(n) != x {
				err = strconv.ErrSyntax
			}
		default:
			err = strconv.ErrSyntax
		}
		if err != nil || n < int64(lo) || n > 1<<31 {
			return 0, fmt.Errorf("%s must be an integer of at least %d", key, lo)
		}
		return int(n), nil
	}
	for k := range args {
		if k != "index" && k != "offset" {
			return 0, 0, fmt.Errorf("unknown argument %q (want index, offset)", k)
		}
	}
	if index, err = num("index", 1); err != nil {
		return 0, 0, err
	}
	offset, err = num("offset", 0)
	return index, offset, err
}

// recallText is recall's answer from the transcript's entries: the list of
// compactions when index is 0, else the messages of compaction index's
// range from offset on, bounded by maxRecall.
func recallText(entries []entry, index, offset int) (string, error) {
	var cmps []entry
	for _, e := range entries {
		if e.Type == entryCompaction && e.MessageRange != nil {
			cmps = append(cmps, e)
		}
	}
	if index == 0 {
		if len(cmps) == 0 {
			return "No compaction has run in this session: the whole conversation is in your context.", nil
		}
		var sb strings.Builder
		sb.WriteString("Compactions of this session (recall with index N to read one back):\n")
		for _, c := range cmps {
			fmt.Fprintf(&sb, "[compaction %d] %d messages, %s … %s\n", c.Index, len(rangeOf(entries, *c.MessageRange)), c.MessageRange[0], c.MessageRange[1])
		}
		return sb.String(), nil
	}
	var c *entry
	for i := range cmps { // the latest of an index wins (a fork's copy of its source's comes first)
		if cmps[i].Index == index {
			c = &cmps[i]
		}
	}
	if c == nil {
		return "", fmt.Errorf("no compaction %d in this session (recall without index lists them)", index)
	}
	msgs := rangeOf(entries, *c.MessageRange)
	if offset >= len(msgs) {
		return "", fmt.Errorf("compaction %d summarized %d messages; offset %d is past them", index, len(msgs), offset)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "[compaction %d] the %d messages it summarized", index, len(msgs))
	if offset > 0 {
		fmt.Fprintf(&sb, ", from message %d on", offset+1)
	}
	sb.WriteString(":\n")
	shown := 0
	for i := offset; i < len(msgs); i++ {
		m := renderRecalled(msgs[i])
		if shown > 0 && sb.Len()+len(m) > maxRecall {
			fmt.Fprintf(&sb, "\n[… %d more messages: recall with index %d and offset %d to continue]", len(msgs)-i, index, i)
			break
		}
		sb.WriteString(m)
		shown++
	}
	return sb.String(), nil
}

// rangeOf returns the message entries from rng[0] to rng[1], in transcript
// order (other entries between them are skipped).
func rangeOf(entries []entry, rng [2]string) []entry {
	var out []entry
	in := false
	for _, e := range entries {
		if e.Type != entryMessage {
			continue
		}
		if e.ID == rng[0] {
			in = true
		}
		if in {
			out = append(out, e)
		}
		if in && e.ID == rng[1] {
			break
		}
	}
	return out
}

// renderRecalled is one message as recall shows it.
func renderRecalled(e entry) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n--- %s (%s)\n", e.ID, e.Role)
	for _, b := range e.Content {
		switch b.Type {
		case protocol.BlockText:
			sb.WriteString(cutBlock(b.Text))
		case protocol.BlockThinking:
			sb.WriteString("[thinking] " + cutBlock(b.Text))
		case protocol.BlockToolCall:
			fmt.Fprintf(&sb, "[tool call %s %s]", b.Name, cutBlock(string(protocol.MustMarshal(b.Args))))
		case protocol.BlockToolResult:
			var text string
			if c := b.Content; c != nil {
				switch {
				case c.Text != "":
					text = c.Text
				case c.Message != "":
					text = c.Message
				case c.Value != nil:
					text = string(protocol.MustMarshal(c.Value))
				}
			}
			label := "result"
			if b.IsError {
				label = "error result"
			}
			if code, ok := e.ExitCodes[b.ToolCallID]; ok {
				label += fmt.Sprintf(", exit code %d", code)
			}
			fmt.Fprintf(&sb, "[%s of %s] %s", label, b.ToolCallID, cutBlock(text))
		default:
			fmt.Fprintf(&sb, "[%s block]", b.Type)
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// cutBlock bounds one block's text.
func cutBlock(s string) string {
	if len(s) <= maxRecallBlock {
		return s
	}
	return strings.ToValidUTF8(s[:maxRecallBlock], "") + fmt.Sprintf(" [… %d more bytes]", len(s)-maxRecallBlock)
}
