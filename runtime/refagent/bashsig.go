package refagent

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// bashSignature is the signature of one simple command of a bash command
// line: its executable as written, the subcommand of a tool that has
// subcommands (go test, git commit, npm run), and the exact, sorted set of
// its flags (a flag's value is not part of it: -run=X and -run X are both
// -run). It is version 1 of the bash_signature grant kind (docs/protocol.md
// §9.5, §13).
type bashSignature struct {
	Exe   string   `json:"exe"`
	Sub   string   `json:"sub,omitempty"`
	Flags []string `json:"flags"`
}

// valid reports whether s is a signature analyzeBash could have made; a
// persisted one that is not grants nothing.
func (s bashSignature) valid() bool {
	if !exeRE.MatchString(s.Exe) || dangerousExe[baseName(s.Exe)] {
		return false
	}
	if s.Sub != "" && (!subRE.MatchString(s.Sub) || !subcommandTools[baseName(s.Exe)]) {
		return false
	}
	if s.Flags == nil || !slices.IsSorted(s.Flags) || len(slices.Compact(slices.Clone(s.Flags))) != len(s.Flags) {
		return false
	}
	for _, f := range s.Flags {
		if !flagRE.MatchString(f) {
			return false
		}
	}
	return true
}

// equal reports whether s and o are the same signature.
func (s bashSignature) equal(o bashSignature) bool {
	return s.Exe == o.Exe && s.Sub == o.Sub && slices.Equal(s.Flags, o.Flags)
}

// String is the signature as the person reads it in a choice's label:
// "go test -v …".
func (s bashSignature) String() string {
	parts := append([]string{s.Exe}, s.Sub)
	parts = append(parts, s.Flags...)
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " ") + " …"
}

var (
	exeRE  = regexp.MustCompile(`^[A-Za-z0-9_.+/-]+$`)
	subRE  = regexp.MustCompile(`^[a-z][a-z0-9_:-]*$`)
	flagRE = regexp.MustCompile(`^--?[A-Za-z0-9][A-Za-z0-9_.:+-]*$`)
)

// subcommandTools are the executables whose first positional word is a
// subcommand, part of the signature: "go test" and "go run" differ.
var subcommandTools = map[string]bool{
	"go": true, "git": true, "npm": true, "pnpm": true, "yarn": true, "bun": true, "deno": true,
	"cargo": true, "rustup": true, "docker": true, "podman": true, "kubectl": true, "helm": true,
	"make": true, "gh": true, "pip": true, "pip3": true, "uv": true, "poetry": true, "dotnet": true,
	"mvn": true, "gradle": true, "terraform": true, "npx": true, "systemctl": true, "brew": true,
	"apt": true, "apt-get": true, "just": true, "task": true, "bazel": true, "swift": true,
}

// dangerousExe are executables that run whatever their arguments say (a
// shell, an interpreter, a wrapper, another host): a signature of theirs
// would allow any command, so no signature grant is offered or honoured
// for them.
var dangerousExe = map[string]bool{
	"sh": true, "bash": true, "zsh": true, "dash": true, "fish": true, "ksh": true, "csh": true, "tcsh": true,
	"env": true, "sudo": true, "su": true, "doas": true, "xargs": true, "eval": true, "exec": true,
	"command": true, "builtin": true, "nohup": true, "timeout": true, "nice": true, "ionice": true,
	"time": true, "watch": true, "strace": true, "ltrace": true, "setsid": true, "chroot": true,
	"ssh": true, "scp": true, "rsync": true, "parallel": true, "find": true, "awk": true, "gawk": true,
	"sed": true, "perl": true, "python": true, "python3": true, "ruby": true, "node": true, "php": true,
	"lua": true, "tclsh": true, "source": true, ".": true, "trap": true, "alias": true, "busybox": true,
}

func baseName(exe string) string {
	if i := strings.LastIndexByte(exe, '/'); i >= 0 {
		return exe[i+1:]
	}
	return exe
}

// errUnanalyzable is any command line analyzeBash does not reduce to
// signatures: it fails closed (no signature grant matches it, none is
// offered for it).
var errUnanalyzable = errors.New("command not analyzable")

// analyzeBash reduces a command line to the signatures of its simple
// commands: words separated by |, ||, && and ;. Only plain words and
// quoted strings are taken; any expansion, substitution, redirection,
// glob, background job, subshell, group, comment, escape, environment
// assignment or newline makes the whole line unanalyzable, as does an
// empty segment or a dangerous executable. Every segment must be
// analyzable: one that is not fails the whole line (fail closed).
func analyzeBash(cmd string) ([]bashSignature, error) {
	segs, err := splitBash(cmd)
	if err != nil {
		return nil, err
	}
	sigs := make([]bashSignature, 0, len(segs))
	for _, words := range segs {
		sig, err := signatureOf(words)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(sigs, sig.equal) {
			sigs = append(sigs, sig)
		}
	}
	return sigs, nil
}

// word is one shell word: its text with quotes removed, and whether any
// part of it was quoted.
type word struct {
	text   string
	quoted bool
}

// splitBash tokenizes cmd into segments of words, refusing everything but
// plain words, quoted strings and the separators | || && ;.
func splitBash(cmd string) ([][]word, error) {
	var segs [][]word
	var cur []word
	var w strings.Builder
	inWord, quoted := false, false
	endWord := func() {
		if inWord {
			cur = append(cur, word{text: w.String(), quoted: quoted})
		}
		w.Reset()
		inWord, quoted = false, false
	}
	endSeg := func() error {
		endWord()
		if len(cur) == 0 {
			return fmt.Errorf("%w: empty command", errUnanalyzable)
		}
		segs = append(segs, cur)
		cur = nil
		return nil
	}
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == ' ' || c == '\t':
			endWord()
		case c == '\'':
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("%w: unterminated quote", errUnanalyzable)
			}
			w.WriteString(cmd[i+1 : i+1+j])
			inWord, quoted = true, true
			i += j + 1
		case c == '"':
			j := strings.IndexByte(cmd[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("%w: unterminated quote", errUnanalyzable)
			}
			s := cmd[i+1 : i+1+j]
			if strings.ContainsAny(s, "$`\\!") {
				return nil, fmt.Errorf("%w: expansion in double quotes", errUnanalyzable)
			}
			w.WriteString(s)
			inWord, quoted = true, true
			i += j + 1
		case c == '|' || c == ';' || c == '&':
			op := string(c)
			if i+1 < len(cmd) && (cmd[i+1] == '|' || cmd[i+1] == '&') && cmd[i+1] == c {
				op += string(c)
				i++
			}
			if op == "&" || op == ";;" {
				return nil, fmt.Errorf("%w: %s", errUnanalyzable, op)
			}
			if err := endSeg(); err != nil {
				return nil, err
			}
		case c >= 0x80 || strings.IndexByte("$`\\()<>{}*?[]~#!\n\r=", c) >= 0 && !(c == '=' && inWord):
			// '=' only inside a word (a flag's value); a word starting
			// with it is refused. Assignments are refused in signatureOf.
			return nil, fmt.Errorf("%w: %q", errUnanalyzable, c)
		case c < 0x20 || c == 0x7f:
			return nil, fmt.Errorf("%w: control character", errUnanalyzable)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if err := endSeg(); err != nil {
		return nil, err
	}
	return segs, nil
}

// signatureOf is the signature of one simple command's words.
func signatureOf(words []word) (bashSignature, error) {
	exe := words[0]
	if exe.quoted || !exeRE.MatchString(exe.text) || strings.Contains(exe.text, "=") {
		return bashSignature{}, fmt.Errorf("%w: executable %q", errUnanalyzable, exe.text)
	}
	if dangerousExe[baseName(exe.text)] {
		return bashSignature{}, fmt.Errorf("%w: %s runs arbitrary commands", errUnanalyzable, exe.text)
	}
	sig := bashSignature{Exe: exe.text, Flags: []string{}}
	wantSub := subcommandTools[baseName(exe.text)]
	flagsDone := false
	for _, w := range words[1:] {
		switch {
		case flagsDone || !strings.HasPrefix(w.text, "-") || w.text == "-":
			if wantSub && sig.Sub == "" && !flagsDone {
				if !subRE.MatchString(w.text) {
					return bashSignature{}, fmt.Errorf("%w: subcommand %q", errUnanalyzable, w.text)
				}
				sig.Sub = w.text
			}
			wantSub = false
		case w.text == "--":
			flagsDone = true
		default:
			name, _, _ := strings.Cut(w.text, "=")
			if !flagRE.MatchString(name) {
				return bashSignature{}, fmt.Errorf("%w: flag %q", errUnanalyzable, name)
			}
			if !slices.Contains(sig.Flags, name) {
				sig.Flags = append(sig.Flags, name)
			}
		}
	}
	slices.Sort(sig.Flags)
	return sig, nil
}
