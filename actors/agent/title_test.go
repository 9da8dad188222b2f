package agent

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAutoTitle(t *testing.T) {
	long := strings.Repeat("word ", 30)
	for _, tc := range []struct{ prompt, want string }{
		{"Fix the login test", "Fix the login test"},
		{"\n\n  ## Heading\twith  tabs \nsecond line", "Heading with tabs"},
		{"> quoted\n", "quoted"},
		{"- a list item", "a list item"},
		{"ctrl\x07chars\u200bhere", "ctrlcharshere"},
		{"   \n\t\n", ""},
		{"###", ""},
		{long, strings.TrimSpace(strings.Repeat("word ", 11)) + "…"},
		{strings.Repeat("x", 100), strings.Repeat("x", titleMaxRunes-1) + "…"},
	} {
		got := autoTitle(tc.prompt)
		if got != tc.want {
			t.Errorf("autoTitle(%q) = %q, want %q", tc.prompt, got, tc.want)
		}
		if n := utf8.RuneCountInString(got); n > titleMaxRunes {
			t.Errorf("autoTitle(%q) has %d runes", tc.prompt, n)
		}
	}
}
