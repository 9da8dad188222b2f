package main

import "testing"

func TestDaemonProcs(t *testing.T) {
	for _, tc := range []struct {
		env  string
		def  int
		want int
	}{
		{"", 2, 3},     // one spare P over the CPUs
		{"", 1, 2},     // also on one CPU
		{"4", 2, 4},    // an explicit GOMAXPROCS wins
		{"0", 2, 3},    // as Go itself: not a setting
		{"lots", 2, 3}, // nor is this
		{"-1", 8, 9},
	} {
		if got := daemonProcs(tc.env, tc.def); got != tc.want {
			t.Errorf("daemonProcs(%q, %d) = %d, want %d", tc.env, tc.def, got, tc.want)
		}
	}
}
