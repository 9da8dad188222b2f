package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestCheckTools: a profile that lists its tools takes only those, naming
// the known ones in the refusal; a profile without a list (an adapter)
// refuses any tools, and one without a skill check refuses skills; the
// skill check runs only for skills given.
func TestCheckTools(t *testing.T) {
	var checked []string
	rc := RuntimeConfig{Profiles: map[string]Profile{
		DefaultProfile: {Tools: []string{"read", "ls"}, Skills: func(cwd string, names []string) error {
			checked = append(checked, cwd+":"+strings.Join(names, ","))
			return protocol.Errorf(protocol.CodeNotFound, "no skill")
		}},
		"acp": {},
	}}
	code := func(err error) protocol.ErrorCode {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			return ""
		}
		return pe.Code
	}
	if err := rc.CheckTools("", []string{"ls", "read"}, []string{"x"}); err != nil {
		t.Fatal(err)
	}
	err := rc.CheckTools("shard", []string{"read", "bash"}, nil)
	if code(err) != protocol.CodeInvalidRequest || !strings.Contains(err.Error(), `"bash"`) || !strings.Contains(err.Error(), "read, ls") {
		t.Fatalf("unknown tool: %v", err)
	}
	if err := rc.CheckTools("acp", []string{"read"}, nil); code(err) != protocol.CodeInvalidRequest {
		t.Fatalf("tools on an adapter: %v", err)
	}
	if err := rc.CheckTools("acp", nil, []string{"x"}); code(err) != protocol.CodeInvalidRequest {
		t.Fatalf("skills on an adapter: %v", err)
	}
	if err := rc.CheckTools("acp", nil, nil); err != nil {
		t.Fatalf("nothing asked of an adapter: %v", err)
	}
	if err := rc.CheckSkills("", "/w", nil); err != nil || len(checked) != 0 {
		t.Fatalf("no skills: %v, checked %v", err, checked)
	}
	if err := rc.CheckSkills("", "/w", []string{"a", "b"}); code(err) != protocol.CodeNotFound || checked[0] != "/w:a,b" {
		t.Fatalf("skills: %v, checked %v", err, checked)
	}
	if err := rc.CheckSkills("acp", "/w", []string{"a"}); code(err) != protocol.CodeInvalidRequest {
		t.Fatalf("skills on an adapter: %v", err)
	}
}
