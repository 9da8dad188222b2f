package refagent

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// Model selection (wire spec §9.2): one provider per runtime, chosen by
// Options.Provider; its catalog; the active model and reasoning level. A
// selection is runtime state under runtime.mu and is read once at the start
// of every provider call, so a change never touches a stream in flight: it
// applies from the next provider call on (effectiveNextCall).

// providerSim is the name of the embedded sim provider (DESIGN §6).
const providerSim = "sim"

// effectiveNextCall is the effective field of model and reasoning changes.
const effectiveNextCall = "next_provider_call"

// Capabilities (wire spec §7).
const (
	capStreamingDeltas  = "streaming-deltas"
	capModeCatalog      = "mode-catalog"
	capModeSwitch       = "mode-switch"
	capModelCatalog     = "model-catalog"
	capModelSwitch      = "model-switch"
	capReasoningCatalog = "reasoning-catalog"
	capReasoningSwitch  = "reasoning-switch"
)

// Reasoning level ids the runtime treats as a model's default when nothing
// was selected: "off" where a model can think or not (Anthropic, sim),
// "medium" where it always reasons (OpenAI's default effort).
const (
	levelOff    = "off"
	levelMedium = "medium"
)

// models is the fixed part of the model controller: the provider and its
// catalog. It is immutable after newModels.
type models struct {
	name    string            // Options.Provider
	real    provider.Provider // nil for sim, which is made per turn (see runtime.providerFor)
	catalog []protocol.ModelDescriptor
	initial protocol.ModelDescriptor
	window  int // sim context window
}

// newModels builds the provider Options name and picks the initial model.
// The API key goes to the provider only.
func newModels(opts Options, log *slog.Logger) (*models, error) {
	m := &models{name: opts.Provider, window: opts.ContextWindow}
	if opts.Provider == providerSim {
		m.catalog = simCatalog(opts.ContextWindow)
	} else {
		p, err := provider.New(provider.Config{
			Name:       opts.Provider,
			BaseURL:    opts.BaseURL,
			Model:      opts.ProviderModel,
			APIKey:     opts.APIKey,
			MaxRetries: opts.MaxRetries,
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		m.real = p
		m.catalog = slices.Clone(p.Models())
		if len(m.catalog) == 0 {
			return nil, fmt.Errorf("%w: provider %s has no models", ErrInvalidOptions, opts.Provider)
		}
	}
	m.initial = m.catalog[0]
	if opts.Provider == providerSim && opts.ProviderModel != "" {
		m.initial = m.pick(opts.ProviderModel, m.initial, log)
	}
	if opts.Model != "" {
		m.initial = m.pick(opts.Model, m.initial, log)
	}
	return m, nil
}

// pick resolves a configured selection: a catalog entry, or for a real
// provider any model name it is asked for (which joins the catalog). An
// unknown sim model is logged and def is kept.
func (m *models) pick(sel string, def protocol.ModelDescriptor, log *slog.Logger) protocol.ModelDescriptor {
	if d, ok := m.find(sel); ok {
		return d
	}
	if m.real == nil {
		log.Warn("unknown sim model; keeping the default", "model", sel, "default", def.ID)
		return def
	}
	name := strings.TrimPrefix(sel, m.name+"/")
	d := protocol.ModelDescriptor{ID: m.name + "/" + name, Provider: m.name, Model: name}
	m.catalog = append(m.catalog, d)
	return d
}

// find returns the catalog entry whose id, or else whose model name, is
// sel.
func (m *models) find(sel string) (protocol.ModelDescriptor, bool) {
	for _, d := range m.catalog {
		if d.ID == sel {
			return d, true
		}
	}
	for _, d := range m.catalog {
		if d.Model == sel {
			return d, true
		}
	}
	return protocol.ModelDescriptor{}, false
}

// levels is the reasoning catalog of model, nil when it has none.
func (m *models) levels(model string) []provider.Level {
	if m.real == nil {
		return simLevels(model)
	}
	return m.real.ReasoningLevels(model)
}

// defaultLevel is the level reported as active before any selection.
func defaultLevel(levels []provider.Level) string {
	for _, want := range []string{levelOff, levelMedium} {
		if slices.ContainsFunc(levels, func(l provider.Level) bool { return l.ID == want }) {
			return want
		}
	}
	return levels[0].ID
}

func hasLevel(levels []provider.Level, id string) bool {
	return slices.ContainsFunc(levels, func(l provider.Level) bool { return l.ID == id })
}

// Response data of the model commands (wire spec §9.2).
type (
	listModelsData struct {
		Models []protocol.ModelDescriptor `json:"models"`
		Active protocol.ModelDescriptor   `json:"active"`
	}
	setModelData struct {
		Previous  protocol.ModelDescriptor `json:"previous"`
		Active    protocol.ModelDescriptor `json:"active"`
		Effective string                   `json:"effective"`
	}
	listReasoningData struct {
		Model     protocol.ModelDescriptor `json:"model"`
		Levels    []provider.Level         `json:"levels"`
		Active    string                   `json:"active"`
		Effective string                   `json:"effective"`
	}
	setReasoningData struct {
		Model     protocol.ModelDescriptor `json:"model"`
		Previous  string                   `json:"previous"`
		Active    string                   `json:"active"`
		Effective string                   `json:"effective"`
	}
)

// capabilitiesLocked is the feature set for hello, sync and model_changed:
// the reasoning controls only while the active model has levels.
func (r *runtime) capabilitiesLocked() []string {
	return capabilities(r.models, r.active.Model)
}

// capabilities is the feature set while model is active.
func capabilities(m *models, model string) []string {
	caps := []string{capStreamingDeltas, capModeCatalog, capModeSwitch, capModelCatalog, capModelSwitch}
	if len(m.levels(model)) > 0 {
		caps = append(caps, capReasoningCatalog, capReasoningSwitch)
	}
	return caps
}

// activeLevelLocked is the reasoning level in effect for levels (the
// active model's catalog, not empty).
func (r *runtime) activeLevelLocked(levels []provider.Level) string {
	if r.reasoning != "" {
		return r.reasoning
	}
	return defaultLevel(levels)
}

func (r *runtime) listModelsLocked(h protocol.Header) {
	r.respondLocked(h, listModelsData{Models: r.models.catalog, Active: r.active})
}

// setModelLocked selects a catalog model for the next provider call. A
// real change emits model_changed; selecting the active model again is
// acknowledged by the response alone, like set_mode. An explicit reasoning
// level the new model does not offer falls back to its default.
func (r *runtime) setModelLocked(h protocol.Header, sel string) {
	d, ok := r.models.find(sel)
	if !ok {
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeNotFound, "model %q not found", sel))
		return
	}
	prev := r.active
	if d.ID != prev.ID {
		r.active = d
		if r.reasoning != "" && !hasLevel(r.models.levels(d.Model), r.reasoning) {
			r.reasoning = ""
		}
		r.emitLocked(protocol.ModelChanged{
			Header:       protocol.Header{Type: protocol.TypeModelChanged},
			Previous:     prev,
			Active:       d,
			Effective:    effectiveNextCall,
			Capabilities: r.capabilitiesLocked(),
		})
	}
	r.respondLocked(h, setModelData{Previous: prev, Active: d, Effective: effectiveNextCall})
}

func (r *runtime) listReasoningLocked(h protocol.Header) {
	levels := r.models.levels(r.active.Model)
	if len(levels) == 0 {
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeNotFound, "model %s has no reasoning levels", r.active.ID))
		return
	}
	r.respondLocked(h, listReasoningData{Model: r.active, Levels: levels, Active: r.activeLevelLocked(levels), Effective: effectiveNextCall})
}

// setReasoningLocked selects a reasoning level of the active model. model
// is the client's idea of the active model (its id, or its name): a stale
// one is a CONFLICT.
func (r *runtime) setReasoningLocked(h protocol.Header, model, effort string) {
	levels := r.models.levels(r.active.Model)
	switch {
	case len(levels) == 0:
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeNotFound, "model %s has no reasoning levels", r.active.ID))
		return
	case model != r.active.ID && model != r.active.Model:
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeConflict, "model %q is not the active model %s", model, r.active.ID))
		return
	case !hasLevel(levels, effort):
		r.respondErrLocked(h, protocol.Errorf(protocol.CodeNotFound, "reasoning level %q not found for model %s", effort, r.active.ID))
		return
	}
	prev := r.activeLevelLocked(levels)
	r.reasoning = effort
	if effort != prev {
		r.emitLocked(protocol.ReasoningLevelChanged{
			Header:    protocol.Header{Type: protocol.TypeReasoningLevelChanged},
			Model:     r.active,
			Previous:  prev,
			Active:    effort,
			Effective: effectiveNextCall,
		})
	}
	r.respondLocked(h, setReasoningData{Model: r.active, Previous: prev, Active: effort, Effective: effectiveNextCall})
}

// priced adds the cost of u when Options.Prices knows its model (the
// model the service reported, or else the one asked for).
func (r *runtime) priced(u protocol.Usage, asked string) protocol.Usage {
	p, ok := r.opts.Prices[u.Model]
	if !ok {
		p, ok = r.opts.Prices[asked]
	}
	if ok {
		u.Cost = p.cost(u)
	}
	return u
}
