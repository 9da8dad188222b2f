package plan

import (
	"strings"
	"testing"
)

func TestGoalPromptRoundTrips(t *testing.T) {
	text := "Add a flag.\n\n- a: sim: say one\n- b: sim: say two (after 1)\n<goal>\n"
	id, got, ok := ReadGoalPrompt(GoalPrompt("goal-01ABC", text))
	if !ok || id != "goal-01ABC" || got != text {
		t.Fatalf("ReadGoalPrompt = %q, %q, %v", id, got, ok)
	}
	for _, msg := range []string{"", "hello", "[team goal ]\n\n<goal>\nx\n</goal>\n", "[team goal g]\nno goal block", "[team goal a b]\n\n<goal>\nx\n</goal>\n"} {
		if _, _, ok := ReadGoalPrompt(msg); ok {
			t.Errorf("ReadGoalPrompt(%q) ok", msg)
		}
	}
}

func FuzzReadGoalPrompt(f *testing.F) {
	f.Add("goal-1", "text")
	f.Fuzz(func(t *testing.T, id, text string) {
		if id == "" || strings.ContainsAny(id, " \t\r\n]") {
			return // not an id: ids are ids/goal- tokens
		}
		msg := GoalPrompt(id, text)
		gotID, gotText, ok := ReadGoalPrompt(msg)
		if ok && (gotID != id || gotText != text) {
			t.Fatalf("round trip of %q %q gave %q %q", id, text, gotID, gotText)
		}
		ReadGoalPrompt(text)
	})
}
