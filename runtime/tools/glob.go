package tools

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// glob is a compiled glob pattern over slash-separated relative paths.
//
// Syntax: "*" matches within one path segment, "?" one character of a
// segment, "[abc]", "[a-z]" and "[!abc]" a character class, "{a,b}" any of
// the alternatives (nestable), "**" as a whole segment any number of
// segments (zero included), and "\" quotes the next character. A pattern
// without "/" is matched against the base name at any depth ("*.go" finds
// every Go file); a pattern with "/" is matched against the whole path
// relative to the search root ("cmd/**/*.go").
type glob struct {
	re       *regexp.Regexp
	baseOnly bool
}

// compileGlob parses pattern.
func compileGlob(pattern string) (glob, error) {
	pattern = strings.TrimPrefix(pattern, "./")
	re, err := globRegexp(pattern)
	if err != nil {
		return glob{}, fmt.Errorf("%w: glob %q: %w", ErrInvalidArgs, pattern, err)
	}
	return glob{re: re, baseOnly: !strings.Contains(pattern, "/")}, nil
}

// match reports whether the slash-separated relative path rel matches.
func (g glob) match(rel string) bool {
	if g.baseOnly {
		return g.re.MatchString(path.Base(rel))
	}
	return g.re.MatchString(rel)
}

// globRegexp translates a glob into an anchored regular expression.
func globRegexp(pattern string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	depth := 0
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch {
		case c == '*':
			j := i
			for j < len(pattern) && pattern[j] == '*' {
				j++
			}
			segStart := i == 0 || pattern[i-1] == '/'
			switch {
			case j-i >= 2 && segStart && j < len(pattern) && pattern[j] == '/':
				b.WriteString("(?:.*/)?") // "**/": zero or more directories
				j++
			case j-i >= 2 && segStart && j == len(pattern):
				b.WriteString(".*") // trailing "**": everything below
			default:
				b.WriteString("[^/]*")
			}
			i = j
		case c == '?':
			b.WriteString("[^/]")
			i++
		case c == '[':
			class, n, ok := globClass(pattern[i:])
			if !ok {
				b.WriteString(`\[`)
				i++
				break
			}
			b.WriteString(class)
			i += n
		case c == '{':
			depth++
			b.WriteString("(?:")
			i++
		case c == '}' && depth > 0:
			depth--
			b.WriteString(")")
			i++
		case c == ',' && depth > 0:
			b.WriteString("|")
			i++
		case c == '\\' && i+1 < len(pattern):
			b.WriteString(regexp.QuoteMeta(pattern[i+1 : i+2]))
			i += 2
		default:
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
			i++
		}
	}
	if depth > 0 {
		return nil, fmt.Errorf("unclosed {")
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// globClass translates the character class at the start of s ("[…]") and
// returns it with the number of bytes it spans; ok is false when s holds
// no closing bracket.
func globClass(s string) (class string, n int, ok bool) {
	var b strings.Builder
	b.WriteString("[")
	i := 1
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		b.WriteString("^/") // a negated class never matches a separator
		i++
	}
	for first := true; i < len(s); i, first = i+1, false {
		c := s[i]
		switch {
		case c == ']' && !first:
			b.WriteString("]")
			return b.String(), i + 1, true
		case c == '-':
			b.WriteByte(c)
		case c > ' ' && c < 0x7f && !isAlnum(c):
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, false
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
