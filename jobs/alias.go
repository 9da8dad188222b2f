package jobs

import (
	"strconv"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// NormalizeAlias is how aliases compare: NFKC, then Unicode case folding
// (spec §10.3: case-insensitive NFKC), so "Ａda" and "ADA" name one alias.
func NormalizeAlias(s string) string {
	return cases.Fold().String(norm.NFKC.String(s))
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
func pickAlias(pool []string, taken func(norm string) bool) string {
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
		if len(pool) == 0 {
			pool = []string{"agent"}
		}
	}
}
