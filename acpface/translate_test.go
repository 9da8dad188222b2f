package acpface

import (
	"errors"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/protocol"
)

func TestPermissionOptionsFollowIntents(t *testing.T) {
	req := &protocol.PermissionRequest{Header: protocol.Header{AgentID: "agent-1"}, RequestID: "r1", Choices: []protocol.PermissionChoice{
		{ID: "allow", Label: "Allow", Intent: "allow"},
		{ID: "allow_signature", Label: "Always allow go test", Intent: "persist"},
		{ID: "deny", Label: "Deny", Intent: "deny"},
	}}
	opts := permissionOptions(req)
	want := []acp.PermissionOptionKind{acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways, acp.PermissionOptionKindRejectOnce}
	if len(opts) != len(want) {
		t.Fatalf("options %+v", opts)
	}
	for i, o := range opts {
		if o.Kind != want[i] || string(o.OptionId) != req.Choices[i].ID || o.Name != req.Choices[i].Label {
			t.Errorf("option %d: %+v", i, o)
		}
	}
	resp, ok := permissionAnswer(req, "allow_signature")
	if !ok || resp.ChoiceID != "allow_signature" || resp.Decision != "" || resp.RequestID != "r1" || resp.AgentID != "agent-1" {
		t.Errorf("answer %+v %v", resp, ok)
	}
	if _, ok := permissionAnswer(req, "nope"); ok {
		t.Error("an option never offered was answered")
	}

	legacy := &protocol.PermissionRequest{RequestID: "r2", Options: []string{"allow", "deny"}}
	opts = permissionOptions(legacy)
	if len(opts) != 2 || opts[1].Kind != acp.PermissionOptionKindRejectOnce {
		t.Fatalf("legacy options %+v", opts)
	}
	resp, ok = permissionAnswer(legacy, opts[1].OptionId)
	if !ok || resp.Decision != "deny" || resp.ChoiceID != "" {
		t.Errorf("legacy answer %+v", resp)
	}
}

func TestQuestionOptions(t *testing.T) {
	opts, ok := questionOptions(&protocol.UIRequest{Kind: protocol.UISelect, Options: []string{"red", "light blue"}})
	if !ok || len(opts) != 3 || opts[1].Name != "light blue" || opts[2].OptionId != uiDismiss {
		t.Fatalf("select: %+v", opts)
	}
	if got := string(questionAnswer(opts[1].OptionId)); got != `"light blue"` {
		t.Errorf("answer %s", got)
	}
	if got := string(questionAnswer(uiDismiss)); got != "null" {
		t.Errorf("dismiss %s", got)
	}
	opts, ok = questionOptions(&protocol.UIRequest{Kind: protocol.UIConfirm})
	if !ok || string(questionAnswer(opts[0].OptionId)) != `"yes"` || string(questionAnswer(opts[1].OptionId)) != `"no"` {
		t.Errorf("confirm: %+v", opts)
	}
	for _, ui := range []protocol.UIRequest{{Kind: protocol.UIInput}, {Kind: protocol.UIEditor}, {Kind: protocol.UINotify},
		{Kind: protocol.UISelect, Multiple: true, Options: []string{"a"}}} {
		if _, ok := questionOptions(&ui); ok {
			t.Errorf("%+v was offered to the editor", ui)
		}
	}
}

func TestRenderDiff(t *testing.T) {
	r := &protocol.RenderDescriptor{Kind: "diff", Path: "a.txt", Hunks: []protocol.Hunk{
		{OldStart: 1, OldLines: 3, NewStart: 1, NewLines: 3, Lines: []string{" one", "-two", "+2", " three"}},
		{OldStart: 9, OldLines: 1, NewStart: 9, NewLines: 2, Lines: []string{" nine", "+ten"}},
	}}
	c, ok := renderDiff("/w", r)
	if !ok || c.Diff == nil || c.Diff.Path != "/w/a.txt" || c.Diff.OldText == nil {
		t.Fatalf("diff %+v", c)
	}
	if *c.Diff.OldText != "one\ntwo\nthree\n…\nnine\n" || c.Diff.NewText != "one\n2\nthree\n…\nnine\nten\n" {
		t.Errorf("old %q new %q", *c.Diff.OldText, c.Diff.NewText)
	}
	created, ok := renderDiff("/w", &protocol.RenderDescriptor{Kind: "diff", Path: "/abs/b.txt",
		Hunks: []protocol.Hunk{{OldStart: 0, OldLines: 0, NewStart: 1, NewLines: 1, Lines: []string{"+bee"}}}})
	if !ok || created.Diff.OldText != nil || created.Diff.NewText != "bee\n" || created.Diff.Path != "/abs/b.txt" {
		t.Errorf("created %+v", created.Diff)
	}
	if _, ok := renderDiff("/w", &protocol.RenderDescriptor{Kind: "code", Path: "a"}); ok {
		t.Error("a code render made a diff")
	}
}

func FuzzRenderDiff(f *testing.F) {
	f.Add("a.txt", 1, 0, " one\n-two\n+2")
	f.Add("", 0, 0, "+x")
	f.Add("p", 3, 2, "\n-\n+\n \\ No newline at end of file")
	f.Fuzz(func(t *testing.T, path string, oldStart, oldLines int, lines string) {
		r := &protocol.RenderDescriptor{Kind: "diff", Path: path, Hunks: []protocol.Hunk{
			{OldStart: oldStart, OldLines: oldLines, Lines: strings.Split(lines, "\n")}}}
		c, ok := renderDiff("/cwd", r)
		if !ok {
			return
		}
		if c.Diff == nil || (oldStart != 0 || oldLines != 0) && c.Diff.OldText == nil {
			t.Fatalf("diff %+v", c)
		}
		// Context lines are on both sides: without changes the sides agree.
		if !strings.Contains(lines, "\n-") && !strings.Contains(lines, "\n+") && !strings.HasPrefix(lines, "-") && !strings.HasPrefix(lines, "+") &&
			c.Diff.OldText != nil && *c.Diff.OldText != c.Diff.NewText {
			t.Fatalf("context only, yet old %q new %q", *c.Diff.OldText, c.Diff.NewText)
		}
	})
}

func TestRPCErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{protocol.Errorf(protocol.CodeNotFound, "agent x not found"), rpcResourceNotFound},
		{protocol.Errorf(protocol.CodeInvalidRequest, "bad"), rpcInvalidParams},
		{protocol.Errorf(protocol.CodeUnsupported, "no images"), rpcInvalidParams},
		{protocol.Errorf(protocol.CodeConflict, "busy"), rpcInternal},
		{errors.New("client: connection closed"), rpcInternal},
	} {
		var re *acp.RequestError
		if !errors.As(rpcError(tc.err), &re) || re.Code != tc.code {
			t.Errorf("%v → %+v, want code %d", tc.err, re, tc.code)
			continue
		}
		if pe := (*protocol.Error)(nil); errors.As(tc.err, &pe) && !strings.Contains(re.Message, string(pe.Code)) {
			t.Errorf("message %q lacks the code %s", re.Message, pe.Code)
		}
	}
}

func TestPromptMessage(t *testing.T) {
	text, images, err := promptMessage([]acp.ContentBlock{
		acp.TextBlock("fix this"),
		acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{Uri: "file:///w/a.go", Text: "package a\n"}}),
		acp.ResourceLinkBlock("b.go", "file:///w/b.go"),
		acp.ImageBlock("aGk=", "image/png"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, "fix this\n") || !strings.Contains(text, "file:///w/a.go:\n```\npackage a\n```") || !strings.Contains(text, "[b.go](file:///w/b.go)") {
		t.Errorf("text %q", text)
	}
	if len(images) != 1 || images[0].MimeType != "image/png" || images[0].Data != "aGk=" || images[0].Type != protocol.ImageType {
		t.Errorf("images %+v", images)
	}
	if _, _, err := promptMessage([]acp.ContentBlock{acp.AudioBlock("x", "audio/wav")}); err == nil {
		t.Error("audio was taken")
	}
}

func TestStopReason(t *testing.T) {
	for _, tc := range []struct {
		te        *protocol.TurnEnd
		cancelled bool
		want      acp.StopReason
	}{
		{nil, false, acp.StopReasonEndTurn},
		{&protocol.TurnEnd{}, true, acp.StopReasonCancelled},
		{&protocol.TurnEnd{StopReason: "max_tokens"}, false, acp.StopReasonMaxTokens},
		{&protocol.TurnEnd{StopReason: "refusal"}, false, acp.StopReasonRefusal},
		{&protocol.TurnEnd{StopReason: "end_turn"}, true, acp.StopReasonCancelled},
		{&protocol.TurnEnd{StopReason: "odd"}, false, acp.StopReasonEndTurn},
	} {
		if got := stopReason(tc.te, tc.cancelled); got != tc.want {
			t.Errorf("%+v cancelled=%v: %s, want %s", tc.te, tc.cancelled, got, tc.want)
		}
	}
}

func TestToolKindsAndMCPServers(t *testing.T) {
	ro := true
	for name, want := range map[string]acp.ToolKind{"read": acp.ToolKindRead, "grep": acp.ToolKindSearch, "edit": acp.ToolKindEdit,
		"bash": acp.ToolKindExecute, "fetch": acp.ToolKindFetch, "fs__list": acp.ToolKindOther} {
		if got := toolKind(name, nil); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if toolKind("fs__list", &ro) != acp.ToolKindRead {
		t.Error("a read-only tool is not read")
	}
	servers, skipped := mcpServers([]acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "fs", Command: "srv", Args: []string{"/w"}, Env: []acp.EnvVariable{{Name: "K", Value: "v"}}}},
		{Http: &acp.McpServerHttpInline{Name: "web", Url: "https://h/mcp", Headers: []acp.HttpHeader{{Name: "A", Value: "b"}}}},
		{Sse: &acp.McpServerSseInline{Name: "old", Url: "https://h/sse"}},
	})
	if servers["fs"].Command != "srv" || servers["fs"].Env["K"] != "v" || servers["web"].Headers["A"] != "b" || len(servers) != 2 {
		t.Errorf("servers %+v", servers)
	}
	if strings.Join(skipped, ",") != "old" {
		t.Errorf("skipped %v", skipped)
	}
}
