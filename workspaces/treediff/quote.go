package treediff

import "strings"

// unquote decodes a C-style quoted string as git writes paths with unusual
// characters (core.quotePath, the default, quotes bytes >= 0x80 too): s
// starts with '"'; the result is the decoded value and what follows the
// closing quote. ok is false when s is not a well-formed quoted string.
func unquote(s string) (val, rest string, ok bool) {
	if len(s) < 2 || s[0] != '"' {
		return "", s, false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return b.String(), s[i+1:], true
		case '\\':
			i++
			if i >= len(s) {
				return "", s, false
			}
			switch e := s[i]; e {
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'v':
				b.WriteByte('\v')
			case 'f':
				b.WriteByte('\f')
			case 'r':
				b.WriteByte('\r')
			case '"', '\\':
				b.WriteByte(e)
			case '0', '1', '2', '3':
				if i+2 >= len(s) || !isOctal(s[i+1]) || !isOctal(s[i+2]) {
					return "", s, false
				}
				b.WriteByte((e-'0')<<6 | (s[i+1]-'0')<<3 | (s[i+2] - '0'))
				i += 2
			default:
				return "", s, false
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", s, false
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// headerPath decodes the path of a "--- " or "+++ " line (s is what follows
// the marker). It strips git's prefix (pfx, "a/" or "b/") and the tab git
// appends to an unquoted name containing a space. null is true for
// /dev/null.
func headerPath(s, pfx string) (path string, null, ok bool) {
	if strings.HasPrefix(s, `"`) {
		v, _, ok := unquote(s)
		if !ok {
			return "", false, false
		}
		return strings.TrimPrefix(v, pfx), false, true
	}
	// An unquoted name never contains a tab (git would quote it), so a tab
	// ends the name: git's trailing one, or a GNU diff timestamp.
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	if s == "/dev/null" {
		return "", true, true
	}
	if s == "" {
		return "", false, false
	}
	return strings.TrimPrefix(s, pfx), false, true
}

// gitLinePaths splits what follows "diff --git " into the old and new paths,
// prefixes stripped. Unquoted names with spaces are ambiguous when they
// differ (a rename); the split then only succeeds for the common case of
// equal names, and the caller takes the paths from the rename or ---/+++
// lines instead.
func gitLinePaths(s string) (oldPath, newPath string, ok bool) {
	switch {
	case strings.HasPrefix(s, `"`):
		a, rest, ok := unquote(s)
		if !ok || !strings.HasPrefix(rest, " ") {
			return "", "", false
		}
		b, ok := onePath(rest[1:])
		if !ok {
			return "", "", false
		}
		return strings.TrimPrefix(a, "a/"), strings.TrimPrefix(b, "b/"), true
	case strings.HasSuffix(s, `"`):
		// Unquoted old name, quoted new one: the new one starts at the
		// last ` "` whose quoted string runs to the end.
		for i := strings.LastIndex(s, ` "`); i > 0; i = strings.LastIndex(s[:i], ` "`) {
			if b, rest, ok := unquote(s[i+1:]); ok && rest == "" {
				return strings.TrimPrefix(s[:i], "a/"), strings.TrimPrefix(b, "b/"), true
			}
		}
		return "", "", false
	}
	// "a/P b/P": equal names split in the middle.
	if n := len(s); n%2 == 1 {
		h := n / 2
		a, b := s[:h], s[h+1:]
		if s[h] == ' ' && strings.HasPrefix(a, "a/") && strings.HasPrefix(b, "b/") && a[2:] == b[2:] {
			return a[2:], b[2:], true
		}
	}
	if i := strings.Index(s, " b/"); i >= 0 && strings.HasPrefix(s, "a/") {
		return s[2:i], s[i+3:], true
	}
	return "", "", false
}

// onePath decodes a single, whole path token, quoted or raw: the path of
// a "rename from/to" or "copy from/to" line, or the second name of a
// "diff --git" line.
func onePath(s string) (string, bool) {
	if strings.HasPrefix(s, `"`) {
		v, rest, ok := unquote(s)
		return v, ok && rest == ""
	}
	return s, s != ""
}
