//go:build linux

package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// plotClusterLive draws the live phase as one SVG of three panels: the
// live agents the cluster held against its nodes (beside the bound the
// phase asked for, per node × nodes), what one live agent cost the
// machine (the daemons' growth per agent and a runtime child's PSS), and
// the daemons' part of it alone, which is where a cluster differs. SVG,
// so that the page renders in the repository's Markdown and diffs as text.
func plotClusterLive(dir string, live []clusterLive) ([]string, error) {
	held := nodesPlot("cluster: live agents (runtimes up) vs nodes, one machine", "live agents")
	over := nodesPlot("cluster: the daemons' memory per live agent", "KiB per live agent")
	mem := nodesPlot("cluster: memory per live agent vs nodes", "KiB per live agent")

	var asked, got, daemon, child, total plotter.XYs
	perNode := make([]plotter.XYs, 0)
	for _, l := range live {
		x := float64(l.Nodes)
		asked = append(asked, plotter.XY{X: x, Y: float64(l.Asked)})
		got = append(got, plotter.XY{X: x, Y: float64(l.Live)})
		for i, n := range l.LivePerNode {
			for len(perNode) <= i {
				perNode = append(perNode, nil)
			}
			perNode[i] = append(perNode[i], plotter.XY{X: x, Y: float64(n)})
		}
		daemon = append(daemon, plotter.XY{X: x, Y: l.DaemonKiBPerAgent})
		child = append(child, plotter.XY{X: x, Y: l.ChildPSSKiB})
		total = append(total, plotter.XY{X: x, Y: l.KiBPerAgent})
	}
	line := func(p *plot.Plot, xys plotter.XYs, label string, i int, dashed bool) error {
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		l.Width = vg.Points(1.5)
		pts.Shape = draw.CircleGlyph{}
		if dashed {
			l.Color, pts.Color = color.Gray{Y: 0x60}, color.Gray{Y: 0x60}
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			pts.Shape = draw.BoxGlyph{}
		}
		p.Add(l, pts)
		p.Legend.Add(label, l, pts)
		return nil
	}
	if err := line(held, got, "live agents held, all nodes", 0, false); err != nil {
		return nil, err
	}
	if len(live) > 0 { // drawn over the held line it matches when nothing ran short
		if err := line(held, asked, fmt.Sprintf("asked: %d per node × nodes (the bound)", live[0].PerNode), 0, true); err != nil {
			return nil, err
		}
	}
	for i, xys := range perNode {
		if err := line(held, xys, fmt.Sprintf("live on n%d", i+1), i+1, false); err != nil {
			return nil, err
		}
	}
	for i, s := range []struct {
		label string
		xys   plotter.XYs
	}{
		{"per live agent: daemons' growth + child PSS", total},
		{"a runtime child's PSS", child},
	} {
		if err := line(mem, s.xys, s.label, i, false); err != nil {
			return nil, err
		}
	}
	if err := line(over, daemon, "shardd RSS growth, all nodes / live agents (NATS included)", 2, false); err != nil {
		return nil, err
	}
	var ticks []plot.Tick
	maxNodes := 1
	for _, l := range live {
		maxNodes = max(maxNodes, l.Nodes)
	}
	for n := 1; n <= maxNodes; n++ {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	for _, p := range []*plot.Plot{held, mem, over} {
		p.X.Min, p.X.Max = 0.5, float64(maxNodes)+0.5
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.Y.Max *= 1.25 // room for the legend
	}

	const w, h = 18 * vg.Inch, 5 * vg.Inch
	c := vgsvg.New(w, h)
	tiles := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{{held, mem, over}}, tiles, draw.New(c))
	held.Draw(canvases[0][0])
	mem.Draw(canvases[0][1])
	over.Draw(canvases[0][2])
	file := filepath.Join(dir, "cluster-live.svg")
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return nil, err
	}
	return []string{file}, f.Close()
}

// nodesPlot is an empty plot of a measure against the cluster's nodes,
// from zero, with its legend at the top left and a grid.
func nodesPlot(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "nodes"
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.YOffs, p.Legend.XOffs = -vg.Millimeter*6, vg.Millimeter*4
	p.Add(plotter.NewGrid())
	return p
}
