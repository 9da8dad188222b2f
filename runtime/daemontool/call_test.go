package daemontool

import (
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
)

func TestAnswerBound(t *testing.T) {
	secs := func(f float64) *float64 { return &f }
	wait := func(timeout *float64) protocol.Command { return &protocol.SubagentWait{Timeout: timeout} }
	tests := []struct {
		name string
		cmd  protocol.Command
		want time.Duration
	}{
		{"create", &protocol.SubagentCreate{}, CallTimeout},
		{"status", &protocol.SubagentStatus{}, CallTimeout},
		{"stop", &protocol.SubagentStop{}, CallTimeout},
		{"team", &protocol.TeamGoalShow{}, CallTimeout},
		{"wait forever", wait(nil), 0},
		{"poll", wait(secs(0)), CallTimeout},
		{"wait 2.5 s", wait(secs(2.5)), 2500*time.Millisecond + CallTimeout},
		{"wait longer than a day", wait(secs(1e12)), 0},
	}
	for _, tt := range tests {
		if got := answerBound(tt.cmd); got != tt.want {
			t.Errorf("%s: answerBound = %s, want %s", tt.name, got, tt.want)
		}
	}
}
