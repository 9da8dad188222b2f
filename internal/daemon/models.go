package daemon

import (
	"cmp"
	"slices"
	"strings"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// models is the daemon's model providers for the actors (agent.Models):
// the catalog of config.ProviderSet, which the reference runtime serves
// the same way (cmd/shardd agent reads the same set), and the resolution
// of a create's provider and model against it (docs/protocol.md §13,
// providers).
func models(cfg *config.Config) agent.Models {
	set := cfg.ProviderSet()
	var catalog []protocol.ModelDescriptor
	for _, p := range set {
		for _, m := range p.Models {
			d := provider.Describe(p.Name, p.Kind, m)
			if p.Kind == config.ProviderSim {
				d.ContextWindow = cfg.Sim.ContextWindow
			}
			catalog = append(catalog, d)
		}
	}
	defProv, defModel := cfg.DefaultModel()
	def := catalog[slices.IndexFunc(catalog, func(d protocol.ModelDescriptor) bool {
		return d.Provider == defProv && d.Model == defModel
	})]
	serves := func(runtime string) bool {
		p, ok := cfg.Runtimes[cmp.Or(runtime, config.DefaultRuntime)]
		return ok && p.Kind == config.KindShard
	}
	return agent.Models{
		Serves:  serves,
		Catalog: protocol.ModelsListData{Models: catalog, Default: def},
		Resolve: func(runtime, prov, model, fallback string) (string, string, error) {
			if !serves(runtime) {
				return ownModels(runtime, prov, model)
			}
			d, err := resolveModel(catalog, def, prov, model, fallback)
			return d.Provider, d.Model, err
		},
	}
}

// resolveModel picks the catalog entry a create's provider and model
// select (agent.Models.Resolve): the default for neither; a provider's
// first model (the default model for the default provider) for a provider
// alone; a model by its id, or by its name in prov, else fallback, else
// every provider, the default first.
func resolveModel(catalog []protocol.ModelDescriptor, def protocol.ModelDescriptor, prov, model, fallback string) (protocol.ModelDescriptor, error) {
	if prov != "" && !slices.ContainsFunc(catalog, func(d protocol.ModelDescriptor) bool { return d.Provider == prov }) {
		return protocol.ModelDescriptor{}, protocol.Errorf(protocol.CodeNotFound, "provider %q is not configured", prov)
	}
	if model == "" {
		if prov == "" || prov == def.Provider {
			return def, nil
		}
		return catalog[slices.IndexFunc(catalog, func(d protocol.ModelDescriptor) bool { return d.Provider == prov })], nil
	}
	if i := slices.IndexFunc(catalog, func(d protocol.ModelDescriptor) bool { return d.ID == model }); i >= 0 {
		if prov != "" && catalog[i].Provider != prov {
			return protocol.ModelDescriptor{}, protocol.Errorf(protocol.CodeNotFound, "model %q is not a model of provider %q", model, prov)
		}
		return catalog[i], nil
	}
	in := func(p string) (protocol.ModelDescriptor, bool) {
		i := slices.IndexFunc(catalog, func(d protocol.ModelDescriptor) bool { return d.Model == model && (p == "" || d.Provider == p) })
		if i < 0 {
			return protocol.ModelDescriptor{}, false
		}
		return catalog[i], true
	}
	scope := cmp.Or(prov, fallback) // "": every provider, the default's first (catalog order)
	if d, ok := in(scope); ok {
		return d, nil
	}
	if scope != "" {
		return protocol.ModelDescriptor{}, protocol.Errorf(protocol.CodeNotFound, "model %q is not configured for provider %q", model, scope)
	}
	return protocol.ModelDescriptor{}, protocol.Errorf(protocol.CodeNotFound, "model %q is not configured", model)
}

// ownModels is the resolution for a runtime profile whose agent chooses
// its own models (acp, pi): the daemon's providers do not apply, so a
// provider is NOT_FOUND; a model is UNSUPPORTED at create, since the
// agent's catalog is known only once it runs: it is chosen with set_model
// then, among what the agent offers (and the profile's models: lists).
func ownModels(runtime, prov, model string) (string, string, error) {
	switch {
	case prov != "":
		return "", "", protocol.Errorf(protocol.CodeNotFound,
			"provider %q is not configured for runtime profile %q: its agent runs on its own models", prov, runtime)
	case model != "":
		return "", "", protocol.Errorf(protocol.CodeUnsupported,
			"runtime profile %q: its agent chooses its own model; select %q with set_model once it runs", runtime, strings.TrimSpace(model))
	}
	return "", "", nil
}
