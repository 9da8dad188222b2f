package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// Rows are paired by their identity fields, not by position, and a metric
// missing on one side is listed, not silently dropped.
func TestCompareResultsPairsRowsByIdentity(t *testing.T) {
	base := []byte(`{"scenario":"fanout","results":{"headline":[
		{"clients":10,"transport":"unix","added_latency":{"p99_ms":2.6},"target_met":false},
		{"clients":10,"transport":"ws","added_latency":{"p99_ms":7.9}}]}}`)
	now := []byte(`{"scenario":"fanout","results":{"headline":[
		{"clients":10,"transport":"ws","added_latency":{"p99_ms":1.2}},
		{"clients":10,"transport":"unix","added_latency":{"p99_ms":0.9},"target_met":true},
		{"clients":100,"transport":"ws","added_latency":{"p99_ms":15}}]}}`)
	rows, onlyBase, onlyNow, err := compareResults(base, now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]comparison{}
	for _, r := range rows {
		got[r.path] = r
	}
	unix := got["headline.[transport=unix clients=10].added_latency.p99_ms"]
	if unix.base != 2.6 || unix.now != 0.9 {
		t.Fatalf("unix p99 = %+v; rows %+v", unix, rows)
	}
	if c := unix.change(); math.Abs(c-(-65.38)) > 0.1 {
		t.Fatalf("change = %.2f%%, want about -65.4%%", c)
	}
	if met := got["headline.[transport=unix clients=10].target_met"]; met.base != 0 || met.now != 1 {
		t.Fatalf("target_met = %+v, want 0 → 1", met)
	}
	if _, ok := got["headline.[transport=ws clients=10].added_latency.p99_ms"]; !ok {
		t.Fatal("ws row not paired")
	}
	if len(onlyBase) != 0 || len(onlyNow) != 1 || !strings.Contains(onlyNow[0], "clients=100") {
		t.Fatalf("onlyBase %v onlyNow %v; want the 100-client row only in this run", onlyBase, onlyNow)
	}
}

func TestCompareRefusesAnotherScenario(t *testing.T) {
	var out bytes.Buffer
	err := printComparison(&out, "base.json", []byte(`{"scenario":"relay","results":{}}`), []byte(`{"scenario":"jobs","results":{}}`))
	if err == nil || !strings.Contains(err.Error(), "relay") {
		t.Fatalf("err = %v, want a scenario mismatch", err)
	}
}
