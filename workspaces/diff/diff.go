package diff

// Status is what happened to a file, with AgentCraft's four values.
type Status string

// The file statuses (AgentCraft DiffFile.status).
const (
	StatusAdded    Status = "added"
	StatusModified Status = "modified"
	StatusDeleted  Status = "deleted"
	StatusRenamed  Status = "renamed"
)

// Kind is the kind of one hunk line (AgentCraft DiffLine.kind).
type Kind string

// The line kinds: added in the branch, deleted from the base, or context
// present in both.
const (
	KindAdd Kind = "add"
	KindDel Kind = "del"
	KindCtx Kind = "ctx"
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
// doc).
type File struct {
	// Path is the file's path in the branch, relative to the repository
	// root; for a deleted file, its path in the base.
	Path string `json:"path"`
	// OldPath is the path in the base, set for renames only.
	OldPath string `json:"old_path,omitempty"`
	// Status is added, modified, deleted or renamed.
	Status Status `json:"status"`
	// Binary is true when git found the content binary; such a file has no
	// hunks and zero counts.
	Binary bool `json:"binary"`
	// Additions and Deletions count this file's added and deleted lines,
	// including lines not kept because of the byte cap.
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
	// OldMode and NewMode are git's octal modes when the diff shows them (a
	// mode change, a new or a deleted file). Additive to AgentCraft.
	OldMode string `json:"old_mode,omitempty"`
	NewMode string `json:"new_mode,omitempty"`
	// Truncated is true when some of this file's lines or hunks were left
	// out by the byte cap. Additive to AgentCraft.
	Truncated bool `json:"truncated,omitempty"`
	// Hunks are the kept hunks. Never nil (empty for binary, empty and
	// mode-only changes).
	Hunks []Hunk `json:"hunks"`
}

// Hunk is one "@@" section (AgentCraft DiffHunk). The start/line counts are
// the header's, even when Lines was cut by the byte cap.
type Hunk struct {
	// Header is the whole header line, function context included, e.g.
	// "@@ -12,6 +12,9 @@ func run()".
	Header   string `json:"header"`
	OldStart int    `json:"old_start"`
	OldLines int    `json:"old_lines"`
	NewStart int    `json:"new_start"`
	NewLines int    `json:"new_lines"`
	// Lines are the kept lines. Never nil.
	Lines []Line `json:"lines"`
}

// Line is one line of a hunk (AgentCraft DiffLine).
type Line struct {
	Kind Kind `json:"kind"`
	// Text is the line without its +/-/space prefix and without the
	// newline (a CRLF file keeps its "\r").
	Text string `json:"text"`
	// OldNo is the 1-based line number in the base (del and ctx lines).
	OldNo int `json:"old_no,omitempty"`
	// NewNo is the 1-based line number in the branch (add and ctx lines).
	NewNo int `json:"new_no,omitempty"`
	// NoNewline is true when this is the last line of its side and that
	// side has no newline at end of file. Additive to AgentCraft.
	NoNewline bool `json:"no_newline,omitempty"`
}

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
