package view

import (
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// NormalizeAlias is how aliases compare: NFKC, then Unicode case folding
// (docs/protocol.md §10.3: case-insensitive NFKC), so "Ａda" and "ADA" name
// one alias.
//
// Cherokee is the exception Unicode makes: its lowercase letters fold to
// the uppercase ones. x/text folds uppercase Cherokee to lowercase instead
// (golang/go#46101), so "Ꭰ" and "ꭰ" would not match; they are mapped to
// the uppercase form here, as CaseFolding.txt specifies.
func NormalizeAlias(s string) string {
	return strings.Map(foldCherokee, cases.Fold().String(norm.NFKC.String(s)))
}

func foldCherokee(r rune) rune {
	if r >= 0x13A0 && unicode.Is(unicode.Cherokee, r) {
		return unicode.ToUpper(r)
	}
	return r
}

// DefaultAliases is the friendly alias pool used when none is configured.
func DefaultAliases() []string {
	return []string{
		"ada", "alan", "barbara", "claude", "dennis", "edsger", "frances", "grace",
		"hedy", "ken", "leslie", "linus", "margaret", "niklaus", "radia", "robin",
		"shafi", "tony", "vint", "yukihiro",
	}
}

// pickAlias returns the first alias of pool not in taken (normalized
// keys), then pool names with a numeric suffix.
// An empty pool behaves as the pool {"agent"}.
func PickAlias(pool []string, taken func(norm string) bool) string {
	if len(pool) == 0 {
		pool = []string{"agent"}
	}
	for round := 0; ; round++ {
		for _, name := range pool {
			a := name
			if round > 0 {
				a = name + "-" + strconv.Itoa(round+1)
			}
			if !taken(NormalizeAlias(a)) {
				return a
			}
		}
	}
}
