package promtext

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// TestSamplesOfARealRegistry exposes a registry the way shardd does and
// reads it back under the keys the bench and the fault suite look up.
func TestSamplesOfARealRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	conns := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shard_connections"}, []string{"transport"})
	conns.WithLabelValues("unix").Set(2)
	conns.WithLabelValues("websocket").Set(1)
	total := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total"}, []string{"b", "a"})
	total.WithLabelValues("2", "1").Add(5)
	commits := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "shard_bbolt_commit_seconds", Buckets: []float64{0.001, 0.01}})
	commits.Observe(0.005)
	commits.Observe(0.5)
	plain := prometheus.NewGauge(prometheus.GaugeOpts{Name: "go_goroutines"})
	plain.Set(17)
	reg.MustRegister(conns, total, commits, plain)

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Samples(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`shard_connections{transport="unix"}`:           2,
		`shard_connections{transport="websocket"}`:      1,
		`x_total{a="1",b="2"}`:                          5,
		`shard_bbolt_commit_seconds_count`:              2,
		`shard_bbolt_commit_seconds_sum`:                0.505,
		`shard_bbolt_commit_seconds_bucket{le="0.001"}`: 0,
		`shard_bbolt_commit_seconds_bucket{le="0.01"}`:  1,
		`shard_bbolt_commit_seconds_bucket{le="+Inf"}`:  2,
		`go_goroutines`:                                 17,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d samples, want %d: %v", len(got), len(want), got)
	}
}

func TestSamplesRejectsGarbage(t *testing.T) {
	if _, err := Samples(bytes.NewReader([]byte("not a metric line at all {{{\n"))); err == nil {
		t.Error("garbage parsed without an error")
	}
}
