package main

import (
	"bytes"
	"testing"
)

func TestWriteYAMLKeepsJSONFieldsAndOrder(t *testing.T) {
	v := struct {
		Zeta  string         `json:"zeta"`
		Alpha int            `json:"alpha_count"`
		Flag  string         `json:"flag"`
		Num   string         `json:"num"`
		Empty []string       `json:"empty"`
		Map   map[string]int `json:"map"`
		Skip  string         `json:"skip,omitempty"`
	}{Zeta: "z", Alpha: 3, Flag: "true", Num: "0123", Empty: []string{}, Map: map[string]int{"b": 2, "a": 1}}
	var b bytes.Buffer
	if err := writeYAML(&b, v); err != nil {
		t.Fatal(err)
	}
	want := `zeta: z
alpha_count: 3
flag: "true"
num: "0123"
empty: []
map:
  a: 1
  b: 2
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestFormatMs(t *testing.T) {
	for ms, want := range map[int64]string{0: "0ms", 850: "850ms", 12_345: "12.3s", 245_000: "4m05s", 7_380_000: "2h03m", -5: "0ms"} {
		if got := formatMs(ms); got != want {
			t.Errorf("formatMs(%d) = %q, want %q", ms, got, want)
		}
	}
}
