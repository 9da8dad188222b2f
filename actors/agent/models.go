package agent

import (
	"cmp"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// Models is the daemon's model providers as the actors see them
// (docs/protocol.md §13, providers): a resolver and a catalog, built by the
// composition root from its configuration, which actors do not read. The
// registry, the jobs coordinator and the workspace actor resolve every
// create through it before anything is committed, so that a manifest's
// provider and model name what its runtime runs. Its zero value accepts
// every selection as given.
type Models struct {
	// Resolve returns the provider and model an agent on runtime profile
	// runtime ("" for the default) runs when its create names provider and
	// model, either of which may be "". model is a catalog id
	// ("<provider>/<model>") or a model name; a name is looked up in
	// provider, else in fallback (a subagent's parent's provider), else in
	// every provider, the default first. An unconfigured provider or model
	// is a NOT_FOUND protocol error. A runtime that chooses its own models
	// (a third-party agent) answers "", "" for an empty selection.
	Resolve func(runtime, provider, model, fallback string) (string, string, error)
	// Serves reports whether agents on runtime profile runtime run on the
	// daemon's providers (the reference runtime) rather than choosing
	// their own models (a third-party agent). nil: every profile does.
	Serves func(runtime string) bool
	// Catalog is the models.list answer: every model of every provider.
	Catalog protocol.ModelsListData
}

// resolve is Resolve, or the selection as given without one.
func (ms Models) resolve(runtime, provider, model, fallback string) (string, string, error) {
	if ms.Resolve == nil {
		return provider, model, nil
	}
	return ms.Resolve(runtime, provider, model, fallback)
}

// ResolveCreate is Resolve for a create naming provider and model (no
// fallback); the zero Models accepts them as given.
func (ms Models) ResolveCreate(runtime, provider, model string) (string, string, error) {
	return ms.resolve(runtime, provider, model, "")
}

// ResolveChild is Resolve for a subagent.create naming provider and model
// under parent (docs/protocol.md §10.3): a child on its parent's runtime
// profile inherits the parent's provider, and its model too when it names
// neither; a model name alone is looked up in the parent's provider first.
func (ms Models) ResolveChild(runtime string, parent store.Agent, provider, model string) (string, string, error) {
	if cmp.Or(runtime, DefaultProfile) != cmp.Or(parent.Runtime, DefaultProfile) {
		return ms.resolve(runtime, provider, model, "") // another kind of runtime, maybe
	}
	if provider == "" && model == "" {
		return ms.resolve(runtime, parent.Provider, parent.Model, "")
	}
	return ms.resolve(runtime, provider, model, parent.Provider)
}

// Check reports why m's runtime could not run the provider and model its
// manifest names (one removed from the configuration since), or nil.
func (ms Models) Check(m store.Agent) error {
	if m.Provider == "" || ms.Resolve == nil || (ms.Serves != nil && !ms.Serves(m.Runtime)) {
		return nil
	}
	_, _, err := ms.Resolve(m.Runtime, m.Provider, m.Model, "")
	return err
}

// Fill is m with the provider and model its runtime runs, for a manifest
// stored before its create resolved them (an empty provider): what the
// default provider serves now. It is not stored; a model change persists
// it.
func (ms Models) Fill(m store.Agent) store.Agent {
	if m.Provider != "" || ms.Resolve == nil || (ms.Serves != nil && !ms.Serves(m.Runtime)) {
		return m
	}
	if p, model, err := ms.Resolve(m.Runtime, "", m.Model, ""); err == nil && p != "" {
		m.Provider, m.Model = p, model
	}
	return m
}
