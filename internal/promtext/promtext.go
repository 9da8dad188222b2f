// Package promtext reads a Prometheus text exposition (what shardd serves at
// /metrics) into flat samples keyed the way the exposition writes them, e.g.
// `shard_connections{transport="unix"}` or `shard_bbolt_commit_seconds_count`.
// The benchmark driver and the fault suite read daemon gauges this way; the
// parsing itself is prometheus/common's expfmt, not a hand-written scanner.
package promtext

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Samples parses r and returns every sample: counters, gauges and untyped
// values under their name; histograms and summaries as their _count, _sum
// and _bucket{le=…} / {quantile=…} series. Labels are written sorted by
// name, as client_golang exposes them.
func Samples(r io.Reader) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("promtext: %w", err)
	}
	out := make(map[string]float64)
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			labels := m.GetLabel()
			switch {
			case m.Counter != nil:
				out[key(name, labels)] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key(name, labels)] = m.GetGauge().GetValue()
			case m.Untyped != nil:
				out[key(name, labels)] = m.GetUntyped().GetValue()
			case m.Histogram != nil:
				h := m.GetHistogram()
				out[key(name+"_count", labels)] = float64(h.GetSampleCount())
				out[key(name+"_sum", labels)] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					out[key(name+"_bucket", labels, "le", bound(b.GetUpperBound()))] = float64(b.GetCumulativeCount())
				}
				out[key(name+"_bucket", labels, "le", "+Inf")] = float64(h.GetSampleCount())
			case m.Summary != nil:
				s := m.GetSummary()
				out[key(name+"_count", labels)] = float64(s.GetSampleCount())
				out[key(name+"_sum", labels)] = s.GetSampleSum()
				for _, q := range s.GetQuantile() {
					out[key(name, labels, "quantile", bound(q.GetQuantile()))] = q.GetValue()
				}
			}
		}
	}
	return out, nil
}

// key writes name{a="x",b="y"} with the labels (and one extra pair, if
// given) sorted by name; a sample without labels is its bare name.
func key(name string, labels []*dto.LabelPair, extra ...string) string {
	pairs := make([][2]string, 0, len(labels)+1)
	for _, l := range labels {
		pairs = append(pairs, [2]string{l.GetName(), l.GetValue()})
	}
	if len(extra) == 2 {
		pairs = append(pairs, [2]string{extra[0], extra[1]})
	}
	if len(pairs) == 0 {
		return name
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i][0] < pairs[j][0] })
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p[0])
		b.WriteString("=")
		b.WriteString(strconv.Quote(p[1]))
	}
	b.WriteByte('}')
	return b.String()
}

// bound formats a bucket bound or quantile as the exposition does.
func bound(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
