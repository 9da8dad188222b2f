package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		goal string
		want []PlannedTask
	}{
		{"no items", "Just do it.\n\nPlease.", nil},
		{"empty", "", nil},
		{"one item", "- flag: sim: say hi", []PlannedTask{{Title: "flag", Prompt: "sim: say hi"}}},
		{
			"the diamond, with prose around",
			"Add a --version flag.\n\n- left: sim: say left\n- right: sim: say right\nsome prose\n- join: sim: say join (after 1, 2)\n",
			[]PlannedTask{
				{Title: "left", Prompt: "sim: say left"},
				{Title: "right", Prompt: "sim: say right"},
				{Title: "join", Prompt: "sim: say join", After: []int{1, 2}},
			},
		},
		{
			"after forms: blanks, order, repeats, no space before",
			"- a: x\n- b: y\n- c: z (after 2 1 2)\n- d: w(after 3)\n- e: v (after\t1,3)",
			[]PlannedTask{
				{Title: "a", Prompt: "x"}, {Title: "b", Prompt: "y"},
				{Title: "c", Prompt: "z", After: []int{1, 2}},
				{Title: "d", Prompt: "w", After: []int{3}},
				{Title: "e", Prompt: "v", After: []int{1, 3}},
			},
		},
		{
			"only the last group is read; other parentheses are prose",
			"- a: x (afterwards)\n- b: see (after 1) (after 1)\n- c: (not after 1)",
			[]PlannedTask{
				{Title: "a", Prompt: "x (afterwards)"},
				{Title: "b", Prompt: "see (after 1)", After: []int{1}},
				{Title: "c", Prompt: "(not after 1)"},
			},
		},
		{
			"the first colon ends the title; the prompt may hold more",
			"- greet : sim: say a: b  ",
			[]PlannedTask{{Title: "greet", Prompt: "sim: say a: b"}},
		},
		{
			"multi-line prompts: two spaces or a tab, verbatim",
			"- build: sim: say building\n  sim: tool bash {\"command\":\"make\"}\n\t  indented more\n  \n  sim: say done\n- docs:\n  sim: say docs\n  sim: say more (after 1)\nprose ends it\n  not a continuation",
			[]PlannedTask{
				{Title: "build", Prompt: "sim: say building\nsim: tool bash {\"command\":\"make\"}\n  indented more\n\nsim: say done"},
				{Title: "docs", Prompt: "sim: say docs\nsim: say more (after 1)"},
			},
		},
		{
			"after on an item line whose prompt continues below",
			"- a: x\n- b: (after 1)\n  sim: say b",
			[]PlannedTask{{Title: "a", Prompt: "x"}, {Title: "b", Prompt: "sim: say b", After: []int{1}}},
		},
		{
			"CRLF",
			"- a: x\r\n  y\r\n- b: z (after 1)\r\n",
			[]PlannedTask{{Title: "a", Prompt: "x\ny"}, {Title: "b", Prompt: "z", After: []int{1}}},
		},
		{
			"not items: no space after the dash, or indented",
			"-a: x\n * b: y\n  - c: z",
			nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.goal)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse = %#v\nwant    %#v", got, tc.want)
			}
			again, err := Parse(Render(got))
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("Parse(Render) = %#v, %v\nRender:\n%s", again, err, Render(got))
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, goal string
		line       int
		says       string
	}{
		{"no colon", "intro\n- just a bullet", 2, "`- <title>: <prompt>`"},
		{"empty title", "- : sim: say x", 1, "`- <title>: <prompt>`"},
		{"no prompt", "- a: x\n- b:\nprose", 2, `item 2 ("b") has no prompt`},
		{"blank prompt", "- a:\n  \n  ", 1, `item 1 ("a") has no prompt`},
		{"only after", "- a: x\n- b: (after 1)", 2, "has no prompt"},
		{"missing item", "- a: x (after 0)", 1, "item 0 does not exist"},
		{"later item", "- a: x (after 2)\n- b: y", 1, "item 1 depends on item 2, which is not before it"},
		{"itself", "- a: x\n- b: y (after 2)", 2, "item 2 depends on itself (a cycle)"},
		{"not a number", "- a: x\n- b: y (after first)", 2, `"first" is not an item number`},
		{"signed", "- a: x\n- b: y (after +1)", 2, "not an item number"},
		{"empty list", "- a: x (after)", 1, "names no item"},
		{"huge", "- a: x (after 99999999999999999999999)", 1, "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := Parse(tc.goal)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse = %v, %v; want an *Error", plan, err)
			}
			if pe.Line != tc.line || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q (line %d); want line %d saying %q", err, pe.Line, tc.line, tc.says)
			}
		})
	}
}

// FuzzParse: Parse never panics, every plan it returns is well formed,
// and Render writes it back as text that parses to the same plan.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "- a: b", "- a: x\n- b: y (after 1)\n- c: z (after 1, 2)",
		"- a:\n  \n  x\n\t\ty\r\n- b: (after 1)\n  z", "- a: x (after 1) (after 1)", "-",
		"- a: x (afterwards)", "- a: x ((after 1))", "- a: x (after 1))", "- t: \u0085x\u0085",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, goal string) {
		plan, err := Parse(goal)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error %v is not an *Error with a line", err)
			}
			return
		}
		for i, p := range plan {
			if p.Title == "" || strings.TrimSpace(p.Prompt) == "" || strings.ContainsAny(p.Title, ":\n") {
				t.Fatalf("item %d malformed: %#v", i+1, p)
			}
			for j, k := range p.After {
				if k < 1 || k > i || (j > 0 && p.After[j-1] >= k) {
					t.Fatalf("item %d After %v", i+1, p.After)
				}
			}
			if p.After != nil && len(p.After) == 0 {
				t.Fatalf("item %d: empty non-nil After", i+1)
			}
		}
		text := Render(plan)
		again, err := Parse(text)
		if err != nil || !reflect.DeepEqual(again, plan) {
			t.Fatalf("Parse(Render(plan)) = %#v, %v\nplan %#v\ntext %q", again, err, plan, text)
		}
	})
}
