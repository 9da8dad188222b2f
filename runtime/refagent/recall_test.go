package refagent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestRecallText: recall lists the compactions, returns a range's messages
// in transcript order (skipping what is not a message), pages a range
// larger than maxRecall with an offset that continues it, and refuses an
// index or offset that is not there.
func TestRecallText(t *testing.T) {
	msg := func(id, role, text string) entry {
		return entry{Type: entryMessage, ID: id, messageFields: messageFields{Role: role,
			Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: text}}}}
	}
	big := strings.Repeat("x", maxRecallBlock+10)
	var entries []entry
	for i := range 20 {
		entries = append(entries, msg(fmt.Sprintf("m%d", i), roleUser, fmt.Sprintf("prompt %d %s", i, big)))
	}
	entries = append(entries,
		entry{Type: entryMessage, ID: "call", messageFields: messageFields{Role: roleAssistant, Content: []protocol.ContentBlock{
			{Type: protocol.BlockToolCall, ID: "c1", Name: "bash", Args: map[string]any{"command": "ls"}}}}},
		entry{Type: entryMessage, ID: "res", messageFields: messageFields{Role: roleUser, ExitCodes: map[string]int{"c1": 2},
			Content: []protocol.ContentBlock{{Type: protocol.BlockToolResult, ToolCallID: "c1", IsError: true,
				Content: &protocol.ToolResultContent{Kind: "text", Text: "no such file"}}}}},
	)
	r1 := [2]string{"m0", "m19"}
	entries = append(entries, entry{Type: entryCompaction, ID: "cmp-1", compactionFields: compactionFields{Index: 1, MessageRange: &r1}})
	r2 := [2]string{"m19", "res"}
	entries = append(entries, entry{Type: entryCompaction, ID: "cmp-2", compactionFields: compactionFields{Index: 2, MessageRange: &r2}})

	list, err := recallText(entries, 0, 0)
	if err != nil || !strings.Contains(list, "[compaction 1] 20 messages, m0 … m19") || !strings.Contains(list, "[compaction 2] 3 messages") {
		t.Fatalf("list %q %v", list, err)
	}
	if none, _ := recallText(entries[:3], 0, 0); !strings.Contains(none, "No compaction") {
		t.Fatalf("no compaction: %q", none)
	}

	var seen []string
	offset := 0
	for pages := 0; ; pages++ {
		text, err := recallText(entries, 1, offset)
		if err != nil {
			t.Fatal(err)
		}
		if len(text) > maxRecall+200 {
			t.Fatalf("page of %d bytes", len(text))
		}
		if !strings.Contains(text, "more bytes]") {
			t.Fatalf("a block over maxRecallBlock was not cut")
		}
		for i := range 20 {
			if strings.Contains(text, fmt.Sprintf("--- m%d (user)\nprompt %d ", i, i)) {
				seen = append(seen, fmt.Sprint(i))
			}
		}
		_, next, found := strings.Cut(text, "and offset ")
		if !found {
			break
		}
		if _, err := fmt.Sscanf(next, "%d", &offset); err != nil || pages > 20 {
			t.Fatalf("continuation %q", next)
		}
	}
	if len(seen) != 20 {
		t.Fatalf("pages showed messages %v, want all 20 once", seen)
	}

	two, err := recallText(entries, 2, 0)
	if err != nil || !strings.Contains(two, "[tool call bash {\"command\":\"ls\"}]") ||
		!strings.Contains(two, "[error result, exit code 2 of c1] no such file") || strings.Contains(two, "--- m18") {
		t.Fatalf("compaction 2: %q %v", two, err)
	}
	if _, err := recallText(entries, 3, 0); err == nil {
		t.Fatal("recall of a compaction that is not there succeeded")
	}
	if _, err := recallText(entries, 2, 3); err == nil {
		t.Fatal("an offset past the range succeeded")
	}
	for _, bad := range []map[string]any{{"index": "1"}, {"index": 0.5}, {"offset": -1}, {"what": 1}} {
		if _, _, err := recallArgs(bad); err == nil {
			t.Errorf("recallArgs(%v) accepted", bad)
		}
	}
}
