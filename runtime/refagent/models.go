package refagent

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// Modes, models and reasoning levels (docs/protocol.md §9.2): the mode
// catalog; one provider per runtime, chosen by Options.Provider, and its
// model catalog (models); and the client's selection among them
// (selection).

// Modes. build may run every tool (mutating ones through the permission
// gate); plan refuses mutating tools.
const (
	modeBuild = "build"
	modePlan  = "plan"
)

// modeCatalog is the list_modes catalog in registration order.
func modeCatalog() []protocol.ModeDescriptor {
	return []protocol.ModeDescriptor{
		{Name: modeBuild, Description: "Read and change files; changes ask for permission."},
		{Name: modePlan, Description: "Read-only: explore and plan; tools that change files are refused."},
	}
}

func knownMode(m string) bool { return m == modeBuild || m == modePlan }

// listModesData is the data of a list_modes response (docs/protocol.md
// §9.2).
type listModesData struct {
	Modes  []protocol.ModeDescriptor `json:"modes"`
	Active string                    `json:"active"`
}

// setModeData is the data of a set_mode response (docs/protocol.md §9.2).
type setModeData struct {
	PreviousMode string `json:"previous_mode"`
	Mode         string `json:"mode"`
}

// providerSim is the name of the embedded sim provider: an offline,
// scripted model (sim.go, docs/sim.md).
const providerSim = "sim"

// effectiveNextCall is the effective field of model and reasoning changes.
const effectiveNextCall = "next_provider_call"

// Capabilities (docs/protocol.md §7).
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

// Response data of the model commands (docs/protocol.md §9.2).
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

// selection is what the next provider call runs with, as the client
// chose it: the mode, the model and its reasoning level, with the fixed
// catalog they are chosen from (models). A selection is read once at the
// start of every provider call (turnState.request), so a change never
// touches a stream in flight: it applies from the next provider call on
// (effectiveNextCall).
//
// runtime.mu protects every field but models, which is immutable; the
// methods ending in Locked must be called with it held, so that a
// selection and the event announcing it change together.
type selection struct {
	out       *output
	models    *models
	mode      string                   // modeBuild or modePlan
	active    protocol.ModelDescriptor // the model of the next provider call
	reasoning string                   // selected reasoning level; "" is the model's default
}

// newSelection starts from the initial model and the saved reasoning
// level (reasoning.go), which applies only if that model offers it.
func newSelection(out *output, m *models, mode, reasoning string) *selection {
	s := &selection{out: out, models: m, mode: mode, active: m.initial}
	if reasoning != "" && hasLevel(m.levels(s.active.Model), reasoning) {
		s.reasoning = reasoning
	}
	return s
}

// capabilitiesLocked is the feature set for hello, sync and model_changed:
// the reasoning controls only while the active model has levels.
func (s *selection) capabilitiesLocked() []string {
	return capabilities(s.models, s.active.Model)
}

// capabilities is the feature set while model is active.
func capabilities(m *models, model string) []string {
	caps := []string{capStreamingDeltas, capModeCatalog, capModeSwitch, capModelCatalog, capModelSwitch}
	if len(m.levels(model)) > 0 {
		caps = append(caps, capReasoningCatalog, capReasoningSwitch)
	}
	return caps
}

// windowLimitLocked is the context window of the active model, in tokens:
// its own, or else Options.ContextWindow.
func (s *selection) windowLimitLocked() int64 {
	if s.active.ContextWindow > 0 {
		return int64(s.active.ContextWindow)
	}
	return int64(s.models.window)
}

// activeLevelLocked is the reasoning level in effect for levels (the
// active model's catalog, not empty).
func (s *selection) activeLevelLocked(levels []provider.Level) string {
	if s.reasoning != "" {
		return s.reasoning
	}
	return defaultLevel(levels)
}

func (s *selection) listModesLocked(h protocol.Header) {
	s.out.respond(h, listModesData{Modes: modeCatalog(), Active: s.mode})
}

func (s *selection) setModeLocked(h protocol.Header, mode string) {
	if !knownMode(mode) {
		s.out.respondErr(h, protocol.Errorf(protocol.CodeNotFound, "mode %q not found", mode))
		return
	}
	prev := s.mode
	if mode != prev {
		s.mode = mode
		s.out.emit(protocol.ModeChanged{Header: protocol.Header{Type: protocol.TypeModeChanged}, PreviousMode: prev, Mode: mode})
	}
	s.out.respond(h, setModeData{PreviousMode: prev, Mode: mode})
}

func (s *selection) listModelsLocked(h protocol.Header) {
	s.out.respond(h, listModelsData{Models: s.models.catalog, Active: s.active})
}

// setModelLocked selects a catalog model for the next provider call. A
// real change emits model_changed; selecting the active model again is
// acknowledged by the response alone, like set_mode. An explicit reasoning
// level the new model does not offer falls back to its default.
func (s *selection) setModelLocked(h protocol.Header, sel string) {
	d, ok := s.models.find(sel)
	if !ok {
		s.out.respondErr(h, protocol.Errorf(protocol.CodeNotFound, "model %q not found", sel))
		return
	}
	prev := s.active
	if d.ID != prev.ID {
		s.active = d
		if s.reasoning != "" && !hasLevel(s.models.levels(d.Model), s.reasoning) {
			s.reasoning = ""
		}
		s.out.emit(protocol.ModelChanged{
			Header:       protocol.Header{Type: protocol.TypeModelChanged},
			Previous:     prev,
			Active:       d,
			Effective:    effectiveNextCall,
			Capabilities: s.capabilitiesLocked(),
		})
	}
	s.out.respond(h, setModelData{Previous: prev, Active: d, Effective: effectiveNextCall})
}

func (s *selection) listReasoningLocked(h protocol.Header) {
	levels := s.models.levels(s.active.Model)
	if len(levels) == 0 {
		s.out.respondErr(h, protocol.Errorf(protocol.CodeNotFound, "model %s has no reasoning levels", s.active.ID))
		return
	}
	s.out.respond(h, listReasoningData{Model: s.active, Levels: levels, Active: s.activeLevelLocked(levels), Effective: effectiveNextCall})
}

// setReasoningLocked selects a reasoning level of the active model. model
// is the client's idea of the active model (its id, or its name): a stale
// one is a CONFLICT.
func (s *selection) setReasoningLocked(h protocol.Header, model, effort string) {
	if err := s.checkReasoningLocked(model, effort); err != nil {
		s.out.respondErr(h, err)
		return
	}
	levels := s.models.levels(s.active.Model)
	prev := s.activeLevelLocked(levels)
	s.reasoning = effort
	if effort != prev {
		s.out.emit(protocol.ReasoningLevelChanged{
			Header:    protocol.Header{Type: protocol.TypeReasoningLevelChanged},
			Model:     s.active,
			Previous:  prev,
			Active:    effort,
			Effective: effectiveNextCall,
		})
	}
	s.out.respond(h, setReasoningData{Model: s.active, Previous: prev, Active: effort, Effective: effectiveNextCall})
}

// checkReasoningLocked is the error set_reasoning_level answers for model
// and effort, nil when the selection is valid.
func (s *selection) checkReasoningLocked(model, effort string) error {
	levels := s.models.levels(s.active.Model)
	switch {
	case len(levels) == 0:
		return protocol.Errorf(protocol.CodeNotFound, "model %s has no reasoning levels", s.active.ID)
	case model != s.active.ID && model != s.active.Model:
		return protocol.Errorf(protocol.CodeConflict, "model %q is not the active model %s", model, s.active.ID)
	case !hasLevel(levels, effort):
		return protocol.Errorf(protocol.CodeNotFound, "reasoning level %q not found for model %s", effort, s.active.ID)
	}
	return nil
}

// dropsReasoningLocked reports whether set_model sel would drop the
// selected reasoning level (setModelLocked).
func (s *selection) dropsReasoningLocked(sel string) bool {
	d, ok := s.models.find(sel)
	return ok && d.ID != s.active.ID && s.reasoning != "" && !hasLevel(s.models.levels(d.Model), s.reasoning)
}

// priced adds the cost of u when prices knows its model (the model the
// service reported, or else the one asked for).
func priced(prices map[string]Price, u protocol.Usage, asked string) protocol.Usage {
	p, ok := prices[u.Model]
	if !ok {
		p, ok = prices[asked]
	}
	if ok {
		u.Cost = p.cost(u)
	}
	return u
}
