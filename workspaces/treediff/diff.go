package treediff

import "github.com/shard-dev/shard/protocol"

// Status is what happened to a file, with AgentCraft's four values. The
// diff types are the wire's (protocol.DiffFile and friends), aliased here:
// Parse fills them directly, so there is one shape and no conversion.
type Status = protocol.DiffFileStatus

// The file statuses (AgentCraft DiffFile.status).
const (
	StatusAdded    = protocol.DiffAdded
	StatusModified = protocol.DiffModified
	StatusDeleted  = protocol.DiffDeleted
	StatusRenamed  = protocol.DiffRenamed
)

// Kind is the kind of one hunk line (AgentCraft DiffLine.kind).
type Kind = protocol.DiffLineKind

// The line kinds: added in the branch, deleted from the base, or context
// present in both.
const (
	KindAdd = protocol.LineAdd
	KindDel = protocol.LineDel
	KindCtx = protocol.LineCtx
)

// Result is a parsed diff: the files kept and the totals over the whole
// diff. Totals are exact even when Truncated (see the package doc). A Result
// is a plain value: safe to share once built, not safe to mutate
// concurrently.
type Result struct {
	// Files are the files kept, in git's order (by path). Never nil.
	Files []File `json:"files"`
	// FileCount is the number of files in the diff, including those dropped
	// past Limits.MaxFiles.
	FileCount int `json:"file_count"`
	// Additions and Deletions count every added and deleted line of the
	// diff, kept or not.
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
	// Truncated is true when a line or a file was left out because of a
	// limit; the File.Truncated flags say which files lost lines.
	Truncated bool `json:"truncated"`
	// Bytes is the size of the text kept: hunk headers and line text, each
	// plus one for its newline (so that even empty lines are bounded). It
	// never exceeds Limits.MaxBytes.
	Bytes int `json:"bytes"`
}

// File is one changed file (AgentCraft DiffFile; JSON names in the package
// doc): protocol.DiffFile itself. Path is the file's path in the branch
// (for a deleted file, in the base), OldPath is set for renames only;
// Additions and Deletions include lines the byte cap did not keep; Hunks
// is never nil (empty for binary, empty and mode-only changes).
type File = protocol.DiffFile

// Hunk is one "@@" section (AgentCraft DiffHunk): protocol.DiffHunk. The
// start/line counts are the header's, even when Lines was cut by the byte
// cap; Lines is never nil.
type Hunk = protocol.DiffHunk

// Line is one line of a hunk (AgentCraft DiffLine): protocol.DiffLine.
type Line = protocol.DiffLine

// Limits bound what a Result keeps. A zero field takes its default.
type Limits struct {
	// MaxBytes caps Result.Bytes (hunk headers and line text kept, one
	// byte more each for the newline).
	// Default DefaultMaxBytes (1 MiB).
	MaxBytes int
	// MaxFiles caps len(Result.Files). Default DefaultMaxFiles (1000).
	MaxFiles int
}

// The default limits: large enough for a normal review, small enough for
// one frame to a client.
const (
	DefaultMaxBytes = 1 << 20
	DefaultMaxFiles = 1000
)

// withDefaults returns l with zero (or negative) fields replaced by the
// defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	return l
}
