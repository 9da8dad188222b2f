// Package treediff turns `git diff` output into the structured review shape
// of `workspace.diff` (docs/protocol.md §10.1a): files, hunks and numbered
// lines with per-file and total +/- counts, binary files marked, and a byte
// cap that sets a truncated flag instead of shipping an unbounded payload.
//
// It is pure Go with no actors and no store, so the workspace actor, the
// subagent completion report and shardctl can all use it; git itself is run
// through an injected RunFunc (ExecRunner is the real binary), which keeps
// this package independent of workspaces/git.
//
// # Wire shape (pinning docs/protocol.md §13 P6)
//
// The shapes are AgentCraft's DiffFile/DiffHunk/DiffLine
// (agentcraft-protocol-v1.md), with the same fields, meanings and enum values,
// spelled in Shard's wire convention (snake_case JSON, as everywhere else
// under protocol/). Shard pins the shape; a peer bridging to AgentCraft maps
// names one to one:
//
//	AgentCraft            Shard (this package)
//	DiffFile.path         File.Path        "path"
//	DiffFile.oldPath      File.OldPath     "old_path"   (renames only)
//	DiffFile.status       File.Status      "status"     added|modified|deleted|renamed
//	DiffFile.binary       File.Binary      "binary"
//	DiffFile.additions    File.Additions   "additions"
//	DiffFile.deletions    File.Deletions   "deletions"
//	DiffFile.hunks        File.Hunks       "hunks"      (always an array, never null)
//	DiffHunk.header       Hunk.Header      "header"     the whole "@@ ... @@ context" line
//	DiffHunk.oldStart     Hunk.OldStart    "old_start"
//	DiffHunk.oldLines     Hunk.OldLines    "old_lines"
//	DiffHunk.newStart     Hunk.NewStart    "new_start"
//	DiffHunk.newLines     Hunk.NewLines    "new_lines"
//	DiffHunk.lines        Hunk.Lines       "lines"      (always an array, never null)
//	DiffLine.kind         Line.Kind        "kind"       add|del|ctx
//	DiffLine.text         Line.Text        "text"       without the +/-/space prefix
//	DiffLine.oldNo        Line.OldNo       "old_no"     (del, ctx; omitted otherwise)
//	DiffLine.newNo        Line.NewNo       "new_no"     (add, ctx; omitted otherwise)
//
// Additive fields, all omitted when empty, that AgentCraft lacks: File.OldMode
// and File.NewMode ("old_mode", "new_mode": git's octal modes, so a mode-only
// change is visible), File.Truncated ("truncated": this file's hunks were cut
// by the byte cap), Line.NoNewline ("no_newline": git's "\ No newline at end
// of file" follows this line). Result carries the AgentCraft `diff` reply's
// stats and truncated flag: "files" (kept), "file_count" (all files in the
// diff, including those past the file cap), "additions", "deletions",
// "truncated" and "bytes" (hunk headers and line text kept, counting a
// newline each).
//
// # Choices
//
//   - Parse is best effort and never panics: on input git would not produce
//     (a bad hunk header, a hunk cut short) it still returns everything it
//     could read, together with an error wrapping ErrMalformed that names the
//     first problem's line. Unknown lines between files are ignored, so a
//     future git header does not break review.
//   - Counts stay exact past the caps: once the byte cap is reached, lines are
//     no longer kept but are still counted, and files past the file cap are
//     dropped but still counted in the totals and in FileCount. Counting is a
//     byte test per line, so exactness costs nothing.
//   - A copy (only produced with --find-copies, which Workspace does not ask
//     for) is reported as "added": AgentCraft has no "copied" status.
//   - Line text keeps a trailing "\r" (CRLF files stay visible as such); it is
//     not UTF-8-validated here (encoding/json replaces invalid bytes).
//   - Workspace needs git 2.28 or later (--no-relative, add
//     --pathspec-from-file, rev-parse --end-of-options).
//   - Workspace includes untracked files through a throwaway index (see its
//     doc): one git diff of the working tree against base, so git's own
//     binary detection, .gitattributes, and rename detection across
//     untracked files all apply, the real index is not written, and no
//     untracked content enters the object database.
package treediff
