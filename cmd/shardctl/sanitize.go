package main

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/shard-dev/shard/protocol"
)

// Terminal safety. Names, labels, errors and model text come from clients
// and from models (a model names its subagents), and a terminal obeys the
// control characters in them: "\n" or "\r" forge table rows, ESC sequences
// move the cursor, recolor, retitle or clear the screen. Every
// human-readable output of shardctl (tables, show, watch, attach, prompt's
// notes) therefore passes what it got from the daemon through safe (or
// safeText for streamed prose) before formatting it; JSON and YAML output
// is escaped by its encoder and left alone.

// safe escapes every character that would act on a terminal instead of
// printing: C0 controls (including "\n", "\r" and "\t"), DEL, C1
// controls, the Unicode line and paragraph separators, bidirectional
// overrides and isolates, and bytes that are not valid UTF-8. Escapes are
// Go-style ("\n", "\x1b", "\u0085", "\xff"), so the output stays one line
// and says what was there.
func safe(s string) string { return escapeControls(s, false) }

// safeText is safe for streamed prose: it keeps "\n" and "\t" (model text
// has paragraphs and code) and escapes everything else safe does.
func safeText(s string) string { return escapeControls(s, true) }

func escapeControls(s string, keepLayout bool) string {
	if !needsEscape(s, keepLayout) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLayout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscape is the fast path: most strings are clean.
func needsEscape(s string, keepLayout bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && !(keepLayout && (c == '\n' || c == '\t')) {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r) {
			return true
		}
		i += size
	}
	return false
}

// unsafeRune reports the non-ASCII runes a terminal acts on or that
// reorder what follows them: C1 controls (U+0080–U+009F, "\u009b" is a
// one-byte CSI), the line and paragraph separators, and the bidirectional
// embeddings, overrides and isolates.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

// safeAll escapes, in place, every string reachable from v (a pointer):
// struct fields, slice and array elements, map keys and values, and what
// interfaces hold (a tool call's decoded arguments). It is applied to what
// the daemon (or the database) said before a table or a line is built from
// it, so no formatting path can forget a field. Raw JSON ([]byte) is left
// alone: it is only ever printed by the JSON and YAML paths.
func safeAll(v any) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return
	}
	sanitizeValue(rv.Elem(), 0)
}

// maxSanitizeDepth bounds the walk (a cycle cannot come from JSON, but a
// bound costs nothing).
const maxSanitizeDepth = 64

func sanitizeValue(v reflect.Value, depth int) {
	if depth > maxSanitizeDepth {
		return
	}
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			if s := v.String(); needsEscape(s, false) {
				v.SetString(safe(s))
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			sanitizeValue(v.Elem(), depth+1)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				sanitizeValue(v.Field(i), depth+1)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // raw JSON
		}
		for i := range v.Len() {
			sanitizeValue(v.Index(i), depth+1)
		}
	case reflect.Interface:
		if v.IsNil() || !v.CanSet() {
			return
		}
		// What an interface holds is not addressable: sanitize a copy and
		// put it back.
		inner := v.Elem()
		cp := reflect.New(inner.Type()).Elem()
		cp.Set(inner)
		sanitizeValue(cp, depth+1)
		v.Set(cp)
	case reflect.Map:
		if v.IsNil() {
			return
		}
		type kv struct{ k, v reflect.Value }
		var entries []kv
		iter := v.MapRange()
		for iter.Next() {
			k := reflect.New(iter.Key().Type()).Elem()
			k.Set(iter.Key())
			val := reflect.New(iter.Value().Type()).Elem()
			val.Set(iter.Value())
			entries = append(entries, kv{k, val})
		}
		for _, e := range entries {
			sanitizeValue(e.v, depth+1)
			nk := reflect.New(e.k.Type()).Elem()
			nk.Set(e.k)
			sanitizeValue(nk, depth+1)
			if !nk.Equal(e.k) {
				v.SetMapIndex(e.k, reflect.Value{})
			}
			v.SetMapIndex(nk, e.v)
		}
	}
}

// safeEvent escapes an event for a person's screen: streamed text as
// safeText does (its paragraphs kept), every other string as safe does.
//
// A sync's live window is left as it is: the transcript renderer escapes
// what it prints (transcriptLines), keeping the text's paragraphs.
func safeEvent(msg protocol.Typed) {
	if sync, ok := msg.(*protocol.Sync); ok {
		lw := sync.LiveWindow
		sync.LiveWindow = protocol.LiveWindow{}
		safeAll(&msg)
		sync.LiveWindow = lw
		return
	}
	var text string
	delta, isDelta := msg.(*protocol.MessageDelta)
	if isDelta {
		text = delta.TextDelta
	}
	safeAll(&msg)
	if isDelta {
		delta.TextDelta = safeText(text)
	}
}
