package view

import (
	"slices"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/shard-dev/shard/internal/testhost"
)

func TestNormalizeAlias(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"ascii lower", "ada", "ada"},
		{"ascii upper", "ADA", "ada"},
		{"fullwidth A (NFKC)", "Ａda", "ada"},
		{"fullwidth word", "ＡＤＡ", "ada"},
		{"fi ligature", "ﬁx", "fix"},
		{"kelvin sign", "\u212Aen", "ken"},
		{"circled digit", "agent-①", "agent-1"},
		{"halfwidth katakana", "ｶ", "カ"},
		{"precomposed é", "ren\u00e9", "ren\u00e9"},
		{"e + combining acute composes", "rene\u0301", "ren\u00e9"},
		{"E + combining acute", "RENE\u0301", "ren\u00e9"},
		// German: full case folding maps ß (and capital ẞ) to "ss".
		{"sharp s", "Straße", "strasse"},
		{"STRASSE", "STRASSE", "strasse"},
		{"capital sharp s", "STRAẞE", "strasse"},
		// Greek: final sigma folds to σ.
		{"greek final sigma", "σίσυφος", "σίσυφοσ"},
		{"greek upper", "ΣΊΣΥΦΟΣ", "σίσυφοσ"},
		// Turkish: folding is the default (non-Turkic) one. Dotted capital İ
		// becomes i + combining dot above, and dotless ı stays itself, so
		// neither matches plain "i".
		{"turkish dotted capital I", "İ", "i\u0307"},
		{"turkish dotless i", "ılık", "ılık"},
		{"latin capital I", "ILIK", "ilik"},
		// Cherokee folds to its uppercase letters (CaseFolding.txt).
		{"cherokee upper", "\u13A0\u13F0", "\u13A0\u13F0"},
		{"cherokee lower", "\uAB70\u13F8", "\u13A0\u13F0"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NormalizeAlias(tt.in); got != tt.want {
				t.Errorf("NormalizeAlias(%q) = %q (%+q), want %q (%+q)", tt.in, got, got, tt.want, tt.want)
			}
		})
	}
}

func TestNormalizeAliasEquivalence(t *testing.T) {
	same := [][]string{
		{"Ａda", "ADA", "ada", "aDa", "ＡＤＡ"},
		{"ﬁx", "fix", "FIX", "ＦＩＸ"},
		{"Straße", "STRASSE", "strasse", "STRAẞE"},
		{"\u13A0", "\uAB70"},
		{"\u212A", "K", "k"},
	}
	for _, group := range same {
		for _, s := range group[1:] {
			if NormalizeAlias(s) != NormalizeAlias(group[0]) {
				t.Errorf("%q and %q should name one alias: %q vs %q", group[0], s, NormalizeAlias(group[0]), NormalizeAlias(s))
			}
		}
	}
	different := [][2]string{
		{"İ", "i"}, // Turkish dotted capital I is not plain i
		{"ı", "i"}, // nor is dotless i
		{"ada", "ada-2"},
		{"ada", "adá"},
		{"ada", "ada "},
	}
	for _, p := range different {
		if NormalizeAlias(p[0]) == NormalizeAlias(p[1]) {
			t.Errorf("%q and %q should be different aliases, both normalize to %q", p[0], p[1], NormalizeAlias(p[0]))
		}
	}
}

// assigned lists the general categories of assigned, non-private code
// points.
var assigned = []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf}

// TestNormalizeAliasProperties checks every assigned code point:
// normalizing twice changes nothing (stored keys are normalized and may be
// normalized again), and every case variant of a letter (its simple-fold
// orbit) normalizes to the same key.
func TestNormalizeAliasProperties(t *testing.T) {
	if testing.Short() {
		testhost.Skip(t, "-short: walks every assigned code point")
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) || !unicode.In(r, assigned...) {
			continue
		}
		key := NormalizeAlias(string(r))
		if again := NormalizeAlias(key); again != key {
			t.Errorf("%U: NormalizeAlias not idempotent: %+q then %+q", r, key, again)
		}
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if k := NormalizeAlias(string(o)); k != key {
				t.Errorf("case variants %U and %U normalize apart: %+q vs %+q", r, o, key, k)
			}
		}
	}
}

func TestPickAlias(t *testing.T) {
	tests := []struct {
		name  string
		pool  []string
		taken []string // normalized keys already bound for the parent
		want  string
	}{
		{"first free", []string{"ada", "alan", "grace"}, nil, "ada"},
		{"skips taken", []string{"ada", "alan", "grace"}, []string{"ada"}, "alan"},
		{"skips several", []string{"ada", "alan", "grace"}, []string{"ada", "alan"}, "grace"},
		{"skips non-contiguous", []string{"ada", "alan", "grace"}, []string{"alan", "ada"}, "grace"},
		{"compares normalized", []string{"Ada", "ＡＬＡＮ", "Grace"}, []string{"ada", "alan"}, "Grace"},
		{"keeps pool spelling", []string{"Ada"}, nil, "Ada"},
		{"exhausted pool suffixes -2", []string{"ada", "alan"}, []string{"ada", "alan"}, "ada-2"},
		{"second suffix round", []string{"ada", "alan"}, []string{"ada", "alan", "ada-2"}, "alan-2"},
		{"third round", []string{"ada"}, []string{"ada", "ada-2"}, "ada-3"},
		{"suffix normalized too", []string{"ADA"}, []string{"ada", "ada-2"}, "ADA-3"},
		{"empty pool", []string{}, nil, "agent"},
		{"nil pool", nil, nil, "agent"},
		{"empty pool exhausted", nil, []string{"agent"}, "agent-2"},
		{"empty pool twice exhausted", nil, []string{"agent", "agent-2"}, "agent-3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			got := PickAlias(tt.pool, func(norm string) bool {
				asked = append(asked, norm)
				return slices.Contains(tt.taken, norm)
			})
			if got != tt.want {
				t.Errorf("PickAlias(%q, taken %q) = %q, want %q", tt.pool, tt.taken, got, tt.want)
			}
			for _, k := range asked {
				if NormalizeAlias(k) != k {
					t.Errorf("taken asked with un-normalized key %q", k)
				}
			}
			if len(asked) == 0 || asked[len(asked)-1] != NormalizeAlias(got) {
				t.Errorf("last key asked %q, want the pick's key %q", asked, NormalizeAlias(got))
			}
		})
	}
}

func TestDefaultAliases(t *testing.T) {
	pool := DefaultAliases()
	if len(pool) < 8 {
		t.Fatalf("default pool has %d aliases", len(pool))
	}
	seen := map[string]bool{}
	for _, a := range pool {
		k := NormalizeAlias(a)
		if k != a {
			t.Errorf("default alias %q is not in normalized form (%q)", a, k)
		}
		if seen[k] {
			t.Errorf("default alias %q repeats", a)
		}
		seen[k] = true
	}
	// Each call returns a fresh slice: callers may not corrupt the default.
	pool[0] = "mutated"
	if DefaultAliases()[0] == "mutated" {
		t.Error("DefaultAliases shares its backing array")
	}
}
