package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// identityKeys name the fields that tell the rows of a result list apart
// (a fan-out row is "clients=10 transport=ws"), so that a comparison pairs
// the same row of two runs even when one run has more rows or another
// order. Rows without any of them are paired by position.
var identityKeys = []string{"scenario", "phase", "mix", "transport", "receiver", "clients", "agents", "parents", "window", "runs", "bytes", "name"}

// metric is one numeric leaf of a result, keyed by its path.
type metric struct {
	path  string
	value float64
}

// flatten lists every numeric leaf of v (a decoded JSON result) under
// prefix, in a stable order. Booleans count as 0/1 so "target_met" shows
// up as a change.
func flatten(prefix string, v any, out *[]metric) {
	switch x := v.(type) {
	case float64:
		*out = append(*out, metric{prefix, x})
	case bool:
		b := 0.0
		if x {
			b = 1
		}
		*out = append(*out, metric{prefix, b})
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			flatten(join(prefix, k), x[k], out)
		}
	case []any:
		for i, e := range x {
			flatten(join(prefix, rowName(e, i)), e, out)
		}
	}
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// rowName names a list element by its identity fields, else by position.
func rowName(e any, i int) string {
	m, ok := e.(map[string]any)
	if !ok {
		return "[" + strconv.Itoa(i) + "]"
	}
	var parts []string
	for _, k := range identityKeys {
		switch v := m[k].(type) {
		case string:
			parts = append(parts, k+"="+v)
		case float64:
			parts = append(parts, k+"="+strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	if len(parts) == 0 {
		return "[" + strconv.Itoa(i) + "]"
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// comparison is one metric in both runs.
type comparison struct {
	path      string
	base, now float64
}

// change is the relative change from base to now, in percent; NaN when the
// base is zero.
func (c comparison) change() float64 {
	if c.base == 0 {
		return math.NaN()
	}
	return (c.now - c.base) / math.Abs(c.base) * 100
}

// compareResults pairs the numeric leaves of two result files' "results"
// that have the same path; leaves in only one of them are listed by path
// in onlyBase/onlyNow. Identity fields themselves are not compared.
func compareResults(base, now []byte) (rows []comparison, onlyBase, onlyNow []string, err error) {
	var b, n struct {
		Scenario string `json:"scenario"`
		Results  any    `json:"results"`
	}
	if err := json.Unmarshal(base, &b); err != nil {
		return nil, nil, nil, fmt.Errorf("base: %w", err)
	}
	if err := json.Unmarshal(now, &n); err != nil {
		return nil, nil, nil, fmt.Errorf("this run: %w", err)
	}
	if b.Scenario != n.Scenario {
		return nil, nil, nil, fmt.Errorf("base is a %q run, this is %q", b.Scenario, n.Scenario)
	}
	var bm, nm []metric
	flatten("", b.Results, &bm)
	flatten("", n.Results, &nm)
	isIdentity := func(path string) bool {
		last := path[strings.LastIndex(path, ".")+1:]
		for _, k := range identityKeys {
			if last == k {
				return true
			}
		}
		return false
	}
	baseByPath := map[string]float64{}
	for _, m := range bm {
		baseByPath[m.path] = m.value
	}
	seen := map[string]bool{}
	for _, m := range nm {
		if isIdentity(m.path) {
			continue
		}
		seen[m.path] = true
		if v, ok := baseByPath[m.path]; ok {
			rows = append(rows, comparison{m.path, v, m.value})
		} else {
			onlyNow = append(onlyNow, m.path)
		}
	}
	for _, m := range bm {
		if !isIdentity(m.path) && !seen[m.path] {
			onlyBase = append(onlyBase, m.path)
		}
	}
	return rows, onlyBase, onlyNow, nil
}

// printComparison writes the comparison of two result files as a table.
func printComparison(w io.Writer, baseName string, base, now []byte) error {
	rows, onlyBase, onlyNow, err := compareResults(base, now)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\ncompared with %s:\n", baseName)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tBASE\tNOW\tCHANGE")
	for _, r := range rows {
		ch := "-"
		if c := r.change(); !math.IsNaN(c) {
			ch = fmt.Sprintf("%+.1f%%", c)
		} else if r.now != r.base {
			ch = "new"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.path, num(r.base), num(r.now), ch)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range onlyBase {
		fmt.Fprintf(w, "only in base: %s\n", p)
	}
	for _, p := range onlyNow {
		fmt.Fprintf(w, "only in this run: %s\n", p)
	}
	return nil
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// compareFiles is `go run ./bench compare BASE.json NEW.json`.
func compareFiles(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench compare BASE.json NEW.json")
		return 2
	}
	base, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	now, err := os.ReadFile(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if err := printComparison(os.Stdout, args[0], base, now); err != nil {
		fmt.Fprintln(os.Stderr, "bench compare:", err)
		return 1
	}
	return 0
}
