package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/protocol"
)

// workspaceDiffOptions are the options of shardctl workspace diff.
type workspaceDiffOptions struct {
	g        *globalOptions
	output   wsOutput
	maxBytes int64
	stat     bool
}

// AddFlags registers the workspace diff flags on cmd.
func (o *workspaceDiffOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.Int64Var(&o.maxBytes, "max-bytes", 0, "cap the diff text at N bytes (default the daemon's cap)")
	fs.BoolVar(&o.stat, "stat", false, "print per-file +/- counts and the total instead of the diff")
}

func newWorkspaceDiffCommand(g *globalOptions) *cobra.Command {
	o := &workspaceDiffOptions{g: g}
	cmd := &cobra.Command{
		Use:   "diff ID [--max-bytes N] [--stat]",
		Short: "Show what a workspace changed",
		Long: `Show everything a workspace changed — commits, staged, unstaged and
untracked files — against the merge base of its branch with the integration
target (workspace.diff), as a unified diff rendered from the daemon's
structured one (diff --git, ---/+++, @@ hunks, +/- lines). On a terminal
additions are green, deletions red and hunk headers cyan; never when piped,
with --no-color or NO_COLOR. --stat prints per-file counts and the total.
When the daemon's byte cap (or --max-bytes) cut the diff, a note goes to
stderr, so stdout stays a patch. -o json|yaml prints the WorkspaceDiffData.
` + workspaceExitHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			if cmd.Flags().Changed("max-bytes") && o.maxBytes <= 0 {
				return usageErrorf("--max-bytes must be positive, got %d", o.maxBytes)
			}
			var data protocol.WorkspaceDiffData
			mk := func(id string) protocol.Typed {
				m := &protocol.WorkspaceDiff{Header: protocol.Header{Type: protocol.TypeWorkspaceDiff}, WorkspaceID: id}
				if o.maxBytes > 0 {
					m.MaxBytes = &o.maxBytes
				}
				return m
			}
			if err := o.g.workspaceCall(cmd.Context(), cmd.ErrOrStderr(), args[0], mk, &data, nil); err != nil {
				return err
			}
			stdout := cmd.OutOrStdout()
			if !o.output.structured() {
				safeDiff(&data)
			}
			if o.output.structured() {
				return o.output.write(stdout, data)
			}
			p := newPalette(stdout, o.g.noColor)
			if o.stat {
				writeDiffStat(stdout, data.Files, data.Stats, p)
			} else {
				writeUnifiedDiff(stdout, data.Files, p)
			}
			if data.Truncated && !o.stat { // --stat counts are whole anyway
				fmt.Fprintf(cmd.ErrOrStderr(), "shardctl: the diff was truncated by its byte cap (files marked truncated lack hunks); counts are whole: %s\n", statTotal(data.Stats))
			}
			return nil
		},
	}
	cmd.ValidArgsFunction = completeWorkspaces(g)
	o.AddFlags(cmd)
	return cmd
}

// writeUnifiedDiff renders structured files as a git-style unified diff.
// Choices: no "index" or mode lines (the structured diff has neither); an
// added file reads from /dev/null and a deleted one writes to it, as git
// does; a binary file gets git's "Binary files … differ" line; a file whose
// hunks the cap cut gets no marker line in the patch (the caller notes it
// on stderr). Colors follow git's: bold file headers, cyan hunk headers,
// green additions, red deletions.
func writeUnifiedDiff(w io.Writer, files []protocol.DiffFile, p palette) {
	for _, f := range files {
		oldPath, newPath := f.OldPath, f.Path
		if oldPath == "" {
			oldPath = f.Path
		}
		fmt.Fprintln(w, p.bold(fmt.Sprintf("diff --git a/%s b/%s", oldPath, newPath)))
		from, to := "a/"+oldPath, "b/"+newPath
		switch f.Status {
		case protocol.DiffAdded:
			fmt.Fprintln(w, p.bold(withMode("new file", f.NewMode)))
			from = "/dev/null"
		case protocol.DiffDeleted:
			fmt.Fprintln(w, p.bold(withMode("deleted file", f.OldMode)))
			to = "/dev/null"
		case protocol.DiffRenamed:
			fmt.Fprintln(w, p.bold("rename from "+oldPath))
			fmt.Fprintln(w, p.bold("rename to "+newPath))
		}
		if f.Status != protocol.DiffAdded && f.Status != protocol.DiffDeleted && f.OldMode != "" && f.NewMode != "" && f.OldMode != f.NewMode {
			fmt.Fprintln(w, p.bold("old mode "+f.OldMode))
			fmt.Fprintln(w, p.bold("new mode "+f.NewMode))
		}
		if f.Binary {
			fmt.Fprintf(w, "Binary files %s and %s differ\n", from, to)
			continue
		}
		if len(f.Hunks) == 0 {
			continue
		}
		fmt.Fprintln(w, p.bold("--- "+from))
		fmt.Fprintln(w, p.bold("+++ "+to))
		for _, h := range f.Hunks {
			fmt.Fprintln(w, p.paint(sgrCyan, hunkHeader(h)))
			for _, l := range h.Lines {
				switch l.Kind {
				case protocol.LineAdd:
					fmt.Fprintln(w, p.paint(sgrGreen, "+"+l.Text))
				case protocol.LineDel:
					fmt.Fprintln(w, p.paint(sgrRed, "-"+l.Text))
				default:
					fmt.Fprintln(w, " "+l.Text)
				}
				if l.NoNewline {
					fmt.Fprintln(w, `\ No newline at end of file`)
				}
			}
		}
	}
}

// withMode is git's "new file mode 100644" line, or just what when the
// diff carries no mode.
func withMode(what, mode string) string {
	if mode == "" {
		return what
	}
	return what + " mode " + mode
}

// hunkHeader is the hunk's "@@ … @@" line as git wrote it, or one built
// from its numbers when the header is missing.
func hunkHeader(h protocol.DiffHunk) string {
	if strings.HasPrefix(h.Header, "@@") {
		return h.Header
	}
	return fmt.Sprintf("@@ -%s +%s @@", hunkRange(h.OldStart, h.OldLines), hunkRange(h.NewStart, h.NewLines))
}

func hunkRange(start, n int) string {
	if n == 1 {
		return strconv.Itoa(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// statBarWidth is the most +/- marks a --stat row draws.
const statBarWidth = 40

// writeDiffStat prints git-style --stat rows: path, changed-line count and
// a bar of + and - scaled to the biggest file, then the total.
func writeDiffStat(w io.Writer, files []protocol.DiffFile, total protocol.DiffStats, p palette) {
	nameW, most := 0, 0
	for _, f := range files {
		nameW = max(nameW, len(statName(f)))
		most = max(most, f.Additions+f.Deletions)
	}
	numW := len(strconv.Itoa(most))
	for _, f := range files {
		name := statName(f)
		if f.Binary {
			fmt.Fprintf(w, " %-*s | %*s\n", nameW, name, numW, "Bin")
			continue
		}
		adds, dels := f.Additions, f.Deletions
		if most > statBarWidth {
			adds = scaleMarks(adds, most)
			dels = scaleMarks(dels, most)
		}
		bar := ""
		if adds+dels > 0 {
			bar = " " + p.paint(sgrGreen, strings.Repeat("+", adds)) + p.paint(sgrRed, strings.Repeat("-", dels))
		}
		fmt.Fprintf(w, " %-*s | %*d%s\n", nameW, name, numW, f.Additions+f.Deletions, bar)
	}
	fmt.Fprintln(w, " "+statTotal(total))
}

// scaleMarks scales n of most changed lines to the bar width, keeping at
// least one mark for a non-zero count.
func scaleMarks(n, most int) int {
	if n == 0 {
		return 0
	}
	return max(1, n*statBarWidth/most)
}

func statName(f protocol.DiffFile) string {
	name := f.Path
	if f.Status == protocol.DiffRenamed && f.OldPath != "" {
		name = f.OldPath + " => " + f.Path
	}
	if f.Untracked {
		name += " (untracked)"
	}
	return name
}

// statTotal is git's summary line: "N files changed, X insertions(+), Y
// deletions(-)".
func statTotal(s protocol.DiffStats) string {
	plural := func(n int, one, many string) string {
		if n == 1 {
			return fmt.Sprintf("%d %s", n, one)
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	return fmt.Sprintf("%s, %s, %s", plural(s.Files, "file changed", "files changed"),
		plural(s.Additions, "insertion(+)", "insertions(+)"), plural(s.Deletions, "deletion(-)", "deletions(-)"))
}

// safeDiff escapes a diff for a terminal: names as safe does, and line
// text as safeText does, so that tabs in code stay tabs (a line holds no
// newline).
func safeDiff(d *protocol.WorkspaceDiffData) {
	var texts []string
	for _, f := range d.Files {
		for _, h := range f.Hunks {
			for _, l := range h.Lines {
				texts = append(texts, l.Text)
			}
		}
	}
	safeAll(d)
	i := 0
	for _, f := range d.Files {
		for _, h := range f.Hunks {
			for k := range h.Lines {
				h.Lines[k].Text = safeText(texts[i])
				i++
			}
		}
	}
}
