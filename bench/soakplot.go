//go:build linux

package main

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// soakPlot draws the curves of a soak's samples (faults -soak-csv) into
// one PNG: RSS and heap in use, goroutines, open fds, over elapsed
// minutes, with a dashed line at each daemon restart (the pid changes).
//
//	go run ./bench soakplot SOAK.csv OUT.png
func soakPlot(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench soakplot SOAK.csv OUT.png")
		return 2
	}
	if err := drawSoak(args[0], args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "bench soakplot:", err)
		return 1
	}
	fmt.Println("plot:", args[1])
	return 0
}

func drawSoak(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return err
	}
	if len(rows) < 2 {
		return fmt.Errorf("%s: no samples", in)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, want := range []string{"elapsed_s", "pid", "rss_bytes", "goroutines", "fds"} {
		if _, ok := col[want]; !ok {
			return fmt.Errorf("%s: no column %q", in, want)
		}
	}
	num := func(row []string, name string) (float64, error) {
		return strconv.ParseFloat(row[col[name]], 64)
	}
	var rss, heap, gor, fds plotter.XYs
	var restarts []float64
	lastPID := ""
	for _, row := range rows[1:] {
		t, err := num(row, "elapsed_s")
		if err != nil {
			return err
		}
		m := t / 60
		if pid := row[col["pid"]]; pid != lastPID {
			if lastPID != "" {
				restarts = append(restarts, m)
			}
			lastPID = pid
		}
		for _, s := range []struct {
			xys   *plotter.XYs
			name  string
			scale float64
		}{{&rss, "rss_bytes", 1 << 20}, {&heap, "heap_inuse_bytes", 1 << 20}, {&gor, "goroutines", 1}, {&fds, "fds", 1}} {
			if _, ok := col[s.name]; !ok {
				continue // heap_inuse_bytes: recorded by later soaks only
			}
			v, err := num(row, s.name)
			if err != nil {
				return err
			}
			*s.xys = append(*s.xys, plotter.XY{X: m, Y: v / s.scale})
		}
	}

	panel := func(title, ylabel string, series ...any) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "elapsed (minutes); dashed: daemon SIGKILLed and restarted"
		p.Y.Label.Text = ylabel
		p.Legend.Top, p.Legend.Left = true, true
		p.Y.Min = 0
		if err := plotutil.AddLines(p, series...); err != nil {
			return nil, err
		}
		p.Y.Min = 0
		for _, r := range restarts {
			l, err := plotter.NewLine(plotter.XYs{{X: r, Y: 0}, {X: r, Y: p.Y.Max}})
			if err != nil {
				return nil, err
			}
			l.Color = color.Gray{Y: 0x90}
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(l)
		}
		p.Add(plotter.NewGrid())
		return p, nil
	}
	mem := []any{"RSS", rss}
	if len(heap) > 0 {
		mem = append(mem, "Go heap in use", heap)
	}
	pm, err := panel("shardd memory under the soak", "MiB", mem...)
	if err != nil {
		return err
	}
	pg, err := panel("goroutines", "goroutines", "goroutines", gor)
	if err != nil {
		return err
	}
	pf, err := panel("open file descriptors", "fds", "open fds", fds)
	if err != nil {
		return err
	}

	img := vgimg.New(plotW, plotH*1.6)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{pm}, {pg}, {pf}}, tiles, dc)
	pm.Draw(canvases[0][0])
	pg.Draw(canvases[1][0])
	pf.Draw(canvases[2][0])
	w, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
