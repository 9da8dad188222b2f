package jobs

import (
	"strconv"

	"github.com/shard-dev/shard/jobs/view"
)

// aliasBinder tells which agent a parent-scoped alias (normalized) is
// bound to in the store; *store.Store is one.
type aliasBinder interface {
	Alias(parent, norm string) (agentID string, bound bool, err error)
}

// aliasAllocator picks the aliases of new children. It is pure bookkeeping
// over the store's bindings, which it reads through binder; it is used by
// the coordinator alone (not safe for concurrent use).
//
// Free means: not bound in the store and not held by a create whose commit
// is in flight. The search for a parent starts at its next position, so
// picking stays cheap however many children the parent has.
type aliasAllocator struct {
	pool   []string
	binder aliasBinder
	// held: aliases (normalized) picked by creates in flight, per parent;
	// they are not in the store yet.
	held map[string]map[string]bool
	// next: per parent, the position in the alias sequence (aliasAt) below
	// which every alias is taken. Aliases are never unbound, so it only
	// moves forward, except that a failed create releases its picks and
	// resets it.
	next map[string]int
}

func newAliasAllocator(pool []string, binder aliasBinder) *aliasAllocator {
	return &aliasAllocator{pool: pool, binder: binder, held: map[string]map[string]bool{}, next: map[string]int{}}
}

// pick picks a free alias for a new child of parent and holds it until
// release. It returns the alias and its normalized form.
func (a *aliasAllocator) pick(parent string) (alias, norm string) {
	held := a.held[parent]
	if held == nil {
		held = map[string]bool{}
		a.held[parent] = held
	}
	pos := a.next[parent]
	contiguous := true // every position before pos is taken
	for ; ; pos++ {
		alias = aliasAt(a.pool, pos)
		norm = view.NormalizeAlias(alias)
		if held[norm] {
			continue
		}
		if _, bound, err := a.binder.Alias(parent, norm); bound || err != nil {
			// A store error counts as taken (the commit would check
			// again), but the position is not known taken for good.
			if err != nil {
				contiguous = false
			}
			continue
		}
		break
	}
	held[norm] = true
	if contiguous {
		a.next[parent] = pos + 1
	}
	return alias, norm
}

// release ends the hold of a create's aliases (normalized alias → agent
// id, as the create commits them). When the create failed they are free
// again, so the parent's search restarts from the first position.
func (a *aliasAllocator) release(parent string, aliases map[string]string, failed bool) {
	held := a.held[parent]
	for norm := range aliases {
		delete(held, norm)
	}
	if len(held) == 0 {
		delete(a.held, parent)
	}
	if failed && len(aliases) > 0 {
		delete(a.next, parent)
	}
}

// aliasAt is the alias at position pos of the sequence view.PickAlias
// walks: the pool's names, then each with "-2", then "-3", and so on.
func aliasAt(pool []string, pos int) string {
	if len(pool) == 0 {
		pool = []string{"agent"}
	}
	name, round := pool[pos%len(pool)], pos/len(pool)
	if round == 0 {
		return name
	}
	return name + "-" + strconv.Itoa(round+1)
}
