package jobs

import (
	"errors"
	"testing"

	"github.com/shard-dev/shard/jobs/view"
)

// fakeBinder is the store's alias bucket as a map (parent → normalized
// alias → agent), with errors injected per alias.
type fakeBinder struct {
	bound  map[string]map[string]string
	errs   map[string]error // normalized alias → error of its lookup
	lookup int
}

func (f *fakeBinder) Alias(parent, norm string) (string, bool, error) {
	f.lookup++
	if err := f.errs[norm]; err != nil {
		return "", false, err
	}
	id, ok := f.bound[parent][norm]
	return id, ok, nil
}

func (f *fakeBinder) bind(parent, alias, agentID string) {
	if f.bound == nil {
		f.bound = map[string]map[string]string{}
	}
	if f.bound[parent] == nil {
		f.bound[parent] = map[string]string{}
	}
	f.bound[parent][view.NormalizeAlias(alias)] = agentID
}

func TestAliasAt(t *testing.T) {
	pool := []string{"ada", "grace", "linus"}
	for _, tt := range []struct {
		pool []string
		pos  int
		want string
	}{
		{pool, 0, "ada"}, {pool, 2, "linus"}, {pool, 3, "ada-2"}, {pool, 5, "linus-2"}, {pool, 7, "grace-3"},
		{nil, 0, "agent"}, {nil, 1, "agent-2"}, {nil, 4, "agent-5"},
	} {
		if got := aliasAt(tt.pool, tt.pos); got != tt.want {
			t.Errorf("aliasAt(%v, %d) = %q, want %q", tt.pool, tt.pos, got, tt.want)
		}
	}
}

func TestAliasAllocator(t *testing.T) {
	pool := []string{"ada", "grace", "linus"}
	type step struct {
		// one of: pick (want the alias), release (the picks so far, failed or not), bind
		pick    string
		release bool
		failed  bool
		bind    string
		parent  string
	}
	for _, tt := range []struct {
		name  string
		setup func(*fakeBinder)
		steps []step
	}{
		{
			name: "sequence walks the pool, then rounds",
			steps: []step{
				{pick: "ada"}, {pick: "grace"}, {pick: "linus"}, {pick: "ada-2"}, {pick: "grace-2"},
			},
		},
		{
			name:  "bound aliases are skipped",
			setup: func(f *fakeBinder) { f.bind("p", "ada", "agent-1"); f.bind("p", "linus", "agent-2") },
			steps: []step{{pick: "grace"}, {pick: "ada-2"}},
		},
		{
			name: "held aliases are not given twice; a successful release keeps the position",
			steps: []step{
				{pick: "ada"}, {pick: "grace"},
				{bind: "ada"}, {bind: "grace"}, {release: true},
				{pick: "linus"},
			},
		},
		{
			name: "a failed create frees its picks and restarts the search",
			steps: []step{
				{pick: "ada"}, {pick: "grace"}, {release: true, failed: true},
				{pick: "ada"}, {pick: "grace"},
			},
		},
		{
			name: "parents are independent",
			steps: []step{
				{pick: "ada"}, {pick: "ada", parent: "q"}, {pick: "grace"}, {pick: "grace", parent: "q"},
			},
		},
		{
			name:  "a store error counts as taken, and is looked up again later",
			setup: func(f *fakeBinder) { f.errs = map[string]error{"ada": errors.New("disk on fire")} },
			steps: []step{
				{pick: "grace"}, {bind: "grace"}, {release: true},
				// The failed position was not passed for good: once the
				// store answers, ada is picked.
				{pick: "ada", bind: ""},
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeBinder{}
			if tt.setup != nil {
				tt.setup(f)
			}
			a := newAliasAllocator(pool, f)
			picks := map[string]map[string]string{} // parent → norm → "agent"
			for i, s := range tt.steps {
				parent := s.parent
				if parent == "" {
					parent = "p"
				}
				switch {
				case s.pick != "":
					if s.pick == "ada" && f.errs != nil {
						f.errs = nil // the store recovered
					}
					alias, norm := a.pick(parent)
					if alias != s.pick || norm != view.NormalizeAlias(s.pick) {
						t.Fatalf("step %d: pick = %q (%q), want %q", i, alias, norm, s.pick)
					}
					if picks[parent] == nil {
						picks[parent] = map[string]string{}
					}
					picks[parent][norm] = "agent-" + norm
				case s.bind != "":
					f.bind(parent, s.bind, "agent-"+s.bind)
				case s.release:
					a.release(parent, picks[parent], s.failed)
					delete(picks, parent)
					if len(a.held[parent]) != 0 {
						t.Fatalf("step %d: %v still held after release", i, a.held[parent])
					}
				}
			}
		})
	}
}

// Picking stays cheap: a parent with many bound children is not searched
// from the start each time.
func TestAliasAllocatorResumesAtNext(t *testing.T) {
	f := &fakeBinder{}
	a := newAliasAllocator([]string{"a", "b"}, f)
	for range 50 {
		alias, norm := a.pick("p")
		f.bind("p", alias, "agent-"+norm)
		a.release("p", map[string]string{norm: "agent-" + norm}, false)
	}
	f.lookup = 0
	if alias, _ := a.pick("p"); alias != aliasAt([]string{"a", "b"}, 50) {
		t.Fatalf("pick after 50 = %q", alias)
	}
	if f.lookup != 1 {
		t.Fatalf("pick looked up %d aliases, want 1", f.lookup)
	}
}
