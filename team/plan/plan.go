// Package plan reads the plan the `sim` lead of a team follows out of a
// goal's text, so that a team runs deterministically with no model: each
// item of the goal becomes one task, in order, whose worker prompt is the
// item's text (so `sim:` directives in it script the worker), and an
// `(after N)` makes it depend on an earlier item. Real models plan with
// their tools; this grammar is the sim lead's only. The package is pure: it
// imports nothing of Shard.
//
// # Grammar
//
// A goal is read line by line (a trailing "\r" is dropped, so CRLF text
// reads the same):
//
//   - An item line starts with "- " in the first column and reads
//     `- <title>: <prompt>`. The title is the text before the first colon,
//     trimmed, and must not be empty; the prompt is the text after it,
//     trimmed. A "- " line without a colon is an error (a typo in a sim
//     script should fail, not vanish).
//   - An item line may end with `(after N)`, `(after N, M)` or `(after N M)`:
//     the item depends on the N-th (and M-th) item, counted from 1 over
//     items only (prose lines do not count). Only the last parenthesized
//     group of the item line is read, and only when it starts with "after";
//     its numbers are decimal digits separated by commas and/or blanks, and
//     may come in any order or repeat (After is sorted, without repeats). A
//     number naming no item, the item itself or a later item is an error:
//     dependencies point back only, so a plan never holds a cycle.
//   - A multi-line prompt goes on in continuation lines: the lines right
//     after an item line that start with two spaces or a tab. That one
//     indent is removed and the rest kept verbatim, so a continuation line
//     can hold a `sim:` directive, code or markdown; a line of just the
//     indent is an empty line of the prompt. The prompt is the item line's
//     text, then one line per continuation line (when the item line has no
//     text after the colon, the prompt starts with the first continuation
//     line). An item whose prompt is empty is an error.
//   - Every other line is prose and is ignored, and ends the item before
//     it: an unindented blank line, a heading, text, a "-" not followed by
//     a space, or an indented line that follows no item.
//
// A goal with no item line has an empty plan (no error): the caller decides
// what a goal without items means.
//
// Example:
//
//	Add a --version flag, split in three.
//
//	- version constant: sim: tool write {"path":"version.go","content":"package main\n"}
//	- flag: sim: say adding the flag
//	  sim: tool edit {"path":"main.go","old":"a","new":"b"}
//	- docs: sim: say documenting (after 1, 2)
package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// PlannedTask is one item of a goal: the task the sim lead creates.
type PlannedTask struct {
	// Title is the task's title.
	Title string
	// Prompt is the worker's prompt; it may span lines.
	Prompt string
	// After are the items this one depends on, 1-based and sorted, each
	// before this one; nil when none.
	After []int
}

// Error is a goal text the grammar refuses, naming the line.
type Error struct {
	// Line is the 1-based line of the goal text at fault.
	Line int
	// Msg says what is wrong.
	Msg string
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("plan: line %d: %s", e.Line, e.Msg) }

// Parse reads the plan of a goal text (see the package doc for the
// grammar). An error is an *Error naming the first line at fault.
func Parse(goal string) ([]PlannedTask, error) {
	var (
		out     []PlannedTask
		inItem  bool // the last line was an item line or its continuation
		itemLn  int  // the line of the current item
		started bool // the current item's prompt has begun
	)
	finish := func() error {
		if inItem && strings.TrimSpace(out[len(out)-1].Prompt) == "" {
			return &Error{Line: itemLn, Msg: fmt.Sprintf("item %d (%q) has no prompt", len(out), out[len(out)-1].Title)}
		}
		inItem = false
		return nil
	}
	for i, line := range strings.Split(goal, "\n") {
		n := i + 1
		line = strings.TrimRight(line, "\r")
		if inItem {
			if rest, ok := cutIndent(line); ok {
				p := &out[len(out)-1]
				if started {
					p.Prompt += "\n" + rest
				} else {
					p.Prompt, started = rest, true
				}
				continue
			}
			if err := finish(); err != nil {
				return nil, err
			}
		}
		body, ok := strings.CutPrefix(line, "- ")
		if !ok {
			continue // prose
		}
		title, text, ok := strings.Cut(body, ":")
		title = strings.TrimSpace(title)
		if !ok || title == "" {
			return nil, &Error{Line: n, Msg: "an item reads `- <title>: <prompt>`"}
		}
		item := len(out) + 1
		text, after, err := cutAfter(strings.TrimSpace(text), item)
		if err != nil {
			return nil, &Error{Line: n, Msg: err.Error()}
		}
		out = append(out, PlannedTask{Title: title, Prompt: text, After: after})
		inItem, itemLn, started = true, n, text != ""
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return out, nil
}

// cutIndent removes one continuation indent: two spaces or a tab.
func cutIndent(line string) (string, bool) {
	if rest, ok := strings.CutPrefix(line, "  "); ok {
		return rest, true
	}
	return strings.CutPrefix(line, "\t")
}

// cutAfter removes a trailing `(after …)` from text, the item line of the
// item-th item, and returns the dependencies it names.
func cutAfter(text string, item int) (string, []int, error) {
	if !strings.HasSuffix(text, ")") {
		return text, nil, nil
	}
	open := strings.LastIndexByte(text, '(')
	if open < 0 {
		return text, nil, nil
	}
	inner := text[open+1 : len(text)-1]
	list, ok := strings.CutPrefix(inner, "after")
	if !ok || strings.ContainsAny(inner, "()") {
		return text, nil, nil
	}
	if list != "" && list[0] != ' ' && list[0] != '\t' && list[0] != ',' {
		return text, nil, nil // "(afterwards)" is prose
	}
	fields := strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	if len(fields) == 0 {
		return "", nil, fmt.Errorf("%q names no item", text[open:])
	}
	var after []int
	for _, f := range fields {
		if strings.Trim(f, "0123456789") != "" {
			return "", nil, fmt.Errorf("%q: %q is not an item number", text[open:], f)
		}
		k, err := strconv.Atoi(f)
		switch {
		case err != nil || k < 1:
			return "", nil, fmt.Errorf("%q: item %s does not exist", text[open:], f)
		case k == item:
			return "", nil, fmt.Errorf("item %d depends on itself (a cycle)", item)
		case k > item:
			return "", nil, fmt.Errorf("item %d depends on item %d, which is not before it (a plan's dependencies point back)", item, k)
		}
		after = append(after, k)
	}
	slices.Sort(after)
	return strings.TrimSpace(text[:open]), slices.Compact(after), nil
}

// Render writes plan as goal text that Parse reads back as the same plan:
// one item line per task, its dependencies as `(after N, M)`, further
// prompt lines indented by two spaces. Render does not check the plan; a
// plan Parse returned always renders back to itself.
func Render(plan []PlannedTask) string {
	var b strings.Builder
	for i, t := range plan {
		lines := strings.Split(t.Prompt, "\n")
		head, rest := lines[0], lines[1:]
		if kept, after, err := cutAfter(head, i+1); head == "" || head != strings.TrimSpace(head) || kept != head || after != nil || err != nil {
			// The item line would read the first line otherwise (blanks
			// trimmed, a trailing "(after …)" taken): the prompt begins on
			// a continuation line.
			head, rest = "", lines
		}
		b.WriteString("- " + t.Title + ":")
		if head != "" {
			b.WriteString(" " + head)
		}
		if len(t.After) > 0 {
			nums := make([]string, len(t.After))
			for i, k := range t.After {
				nums[i] = strconv.Itoa(k)
			}
			b.WriteString(" (after " + strings.Join(nums, ", ") + ")")
		}
		b.WriteString("\n")
		for _, l := range rest {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}
