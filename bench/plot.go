//go:build linux

package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot size (PNG at vgimg's default 96 dpi: about 1150 × 720 px).
const (
	plotW = 12 * vg.Inch
	plotH = 7.5 * vg.Inch
)

// latencySeries is one line of the fan-out latency plots.
type latencySeries struct {
	label  string
	sorted []float64 // ms, ascending
	dashed bool
}

// plotFanout draws the fan-out added-latency CDF (log x) and its tail
// (1 − CDF, log-log, where p99 and p999 are readable) into dir.
func plotFanout(dir string, res fanoutResult) ([]string, error) {
	var series []latencySeries
	add := func(label string, lats []time.Duration, dashed bool) {
		if len(lats) == 0 {
			return
		}
		v := make([]float64, len(lats))
		for i, d := range lats {
			v[i] = max(float64(d)/1e6, 1e-3) // log axes: clamp at 1 µs
		}
		slices.Sort(v)
		series = append(series, latencySeries{label: label, sorted: v, dashed: dashed})
	}
	if b := res.Baseline; b != nil {
		add("stdio, no daemon (baseline)", b.latencies, true)
	}
	for _, p := range res.Floor {
		add(fmt.Sprintf("bare relay, %d unix clients (floor)", p.Clients), p.latencies, true)
	}
	for _, p := range res.Phases {
		add(fmt.Sprintf("%s, %d clients", p.Transport, p.Clients), p.latencies, false)
	}
	if len(series) == 0 {
		return nil, nil
	}
	rate := "unpaced"
	if len(res.Phases) > 0 && res.Phases[0].Rate > 0 {
		rate = fmt.Sprintf("%d events/s", res.Phases[0].Rate)
	}

	cdf := plot.New()
	cdf.Title.Text = fmt.Sprintf("fanout: added latency CDF (receive − runtime stamp), %s", rate)
	cdf.X.Label.Text = "added latency (ms, log)"
	cdf.Y.Label.Text = "fraction of deltas × clients"
	cdf.X.Scale, cdf.X.Tick.Marker = plot.LogScale{}, decadeTicks{}
	cdf.Y.Min, cdf.Y.Max = 0, 1
	cdf.Legend.Top, cdf.Legend.Left = false, false
	cdf.Legend.YOffs = 2 * vg.Centimeter

	tail := plot.New()
	tail.Title.Text = fmt.Sprintf("fanout: added latency tail, 1 − CDF (p99 at 0.01, p999 at 0.001), %s", rate)
	tail.X.Label.Text = "added latency (ms, log)"
	tail.Y.Label.Text = "fraction slower (log)"
	tail.X.Scale, tail.X.Tick.Marker = plot.LogScale{}, decadeTicks{}
	tail.Y.Scale, tail.Y.Tick.Marker = plot.LogScale{}, decadeTicks{}

	for i, s := range series {
		var up, down plotter.XYs
		n := len(s.sorted)
		for _, k := range quantileIndices(n) {
			up = append(up, plotter.XY{X: s.sorted[k], Y: float64(k+1) / float64(n)})
			if k < n-1 {
				down = append(down, plotter.XY{X: s.sorted[k], Y: float64(n-1-k) / float64(n)})
			}
		}
		for _, pl := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{cdf, up}, {tail, down}} {
			if len(pl.xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(pl.xys)
			if err != nil {
				return nil, err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.5)
			if s.dashed {
				l.Color = color.Gray{Y: 0x40}
				l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			pl.p.Add(l)
			pl.p.Legend.Add(s.label, l)
		}
	}
	// The target: p99 ≤ 1 ms.
	for _, p := range []*plot.Plot{cdf, tail} {
		lo, hi := 0.0, 1.0
		if p == tail {
			lo, hi = p.Y.Min, p.Y.Max
		}
		l, err := plotter.NewLine(plotter.XYs{{X: fanoutTargetP99, Y: lo}, {X: fanoutTargetP99, Y: hi}})
		if err != nil {
			return nil, err
		}
		l.Color = color.RGBA{R: 0xd0, A: 0xff}
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("target p99 ≤ %g ms", fanoutTargetP99), l)
	}
	tail.Add(plotter.NewGrid())
	cdf.Add(plotter.NewGrid())

	files := []string{filepath.Join(dir, "fanout-latency-cdf.png"), filepath.Join(dir, "fanout-latency-tail.png")}
	for i, p := range []*plot.Plot{cdf, tail} {
		if err := p.Save(plotW, plotH, files[i]); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// decadeTicks marks a log axis at every power of ten, labelled exactly
// (plot.LogTicks labels 10⁻⁵ as 9.999999999999999e-05), with unlabelled
// minor ticks at 2…9 × each.
type decadeTicks struct{}

func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for k := int(math.Floor(math.Log10(lo))); k <= int(math.Ceil(math.Log10(hi))); k++ {
		v := math.Pow10(k)
		if v >= lo && v <= hi {
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
		for m := 2; m < 10; m++ {
			if mv := float64(m) * v; mv >= lo && mv <= hi {
				ts = append(ts, plot.Tick{Value: mv})
			}
		}
	}
	return ts
}

// quantileIndices picks the indices of a sorted sample of n values that
// draw its CDF: 500 evenly spaced, plus a denser tail (every decile of
// the last 10 %, 1 %, 0.1 % …) and the maximum.
func quantileIndices(n int) []int {
	if n == 0 {
		return nil
	}
	var out []int
	for i := range 500 {
		out = append(out, i*(n-1)/499)
	}
	for tail := 0.1; tail*float64(n) >= 1; tail /= 10 {
		for j := range 100 {
			q := 1 - tail + tail*float64(j)/100
			out = append(out, min(n-1, int(q*float64(n))))
		}
	}
	out = append(out, n-1)
	slices.Sort(out)
	return slices.Compact(out)
}

// plotScale draws the daemon's RSS against the number of agents: while
// spawning, with every runtime live and idle, and after reaping, against
// the target slope from the pre-spawn RSS.
func plotScale(dir string, phases []scalePhase) ([]string, error) {
	if len(phases) == 0 {
		return nil, nil
	}
	mib := func(kib float64) float64 { return kib / 1024 }
	p := plot.New()
	p.Title.Text = "scale: shardd memory (its runtime children excluded) vs agents"
	p.X.Label.Text = "agents"
	p.Y.Label.Text = "MiB"
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = 1.5 * vg.Centimeter
	p.Add(plotter.NewGrid())

	for i, ph := range phases {
		var xys plotter.XYs
		for _, s := range ph.samples {
			xys = append(xys, plotter.XY{X: float64(s.agents), Y: mib(float64(s.rssKiB))})
		}
		if len(xys) < 2 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = color.Gray{Y: uint8(0x90 + 0x20*(i%3))}
		l.Width = vg.Points(0.8)
		p.Add(l)
		if i == 0 {
			p.Legend.Add("RSS while spawning (every 100 ms; one line per run)", l)
		}
	}

	maxA := 0
	var before, live, reaped, heap, heapReaped plotter.XYs
	for _, ph := range phases {
		a := float64(ph.Created)
		maxA = max(maxA, ph.Created)
		before = append(before, plotter.XY{X: 0, Y: mib(float64(ph.Before.RSSKiB))})
		live = append(live, plotter.XY{X: a, Y: mib(float64(ph.Live.RSSKiB))})
		reaped = append(reaped, plotter.XY{X: a, Y: mib(float64(ph.Reaped.RSSKiB))})
		heap = append(heap, plotter.XY{X: a, Y: mib(ph.Live.HeapInuse)})
		heapReaped = append(heapReaped, plotter.XY{X: a, Y: mib(ph.Reaped.HeapInuse)})
	}
	for i, s := range []struct {
		label string
		xys   plotter.XYs
	}{
		{"RSS, live idle (every runtime running)", live},
		{"RSS after idle reaping (every runtime stopped)", reaped},
		{"Go heap in use, live idle", heap},
		{"Go heap in use after reaping", heapReaped},
	} {
		l, pts, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return nil, err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		l.Width = vg.Points(1.5)
		pts.Shape = draw.CircleGlyph{}
		p.Add(l, pts)
		p.Legend.Add(s.label, l, pts)
	}
	sc, err := plotter.NewScatter(before)
	if err != nil {
		return nil, err
	}
	sc.Shape = draw.BoxGlyph{}
	p.Add(sc)
	p.Legend.Add("RSS before spawning", sc)

	base := mib(float64(phases[0].Before.RSSKiB))
	target, err := plotter.NewLine(plotter.XYs{{X: 0, Y: base}, {X: float64(maxA), Y: base + mib(float64(maxA*scaleTargetKiB))}})
	if err != nil {
		return nil, err
	}
	target.Color = color.RGBA{R: 0xd0, A: 0xff}
	target.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(target)
	p.Legend.Add(fmt.Sprintf("target: RSS before + %d KiB per agent", scaleTargetKiB), target)
	p.X.Min = 0
	p.Y.Max = math.Max(p.Y.Max, base+mib(float64(maxA*scaleTargetKiB))) * 1.05

	file := filepath.Join(dir, "scale-rss.png")
	if err := p.Save(plotW, plotH, file); err != nil {
		return nil, err
	}
	return []string{file}, nil
}
