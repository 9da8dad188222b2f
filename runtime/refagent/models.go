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
// catalog; the providers of the runtime (Options.Providers) and their joint
// model catalog (models), across which set_model switches; and the
// client's selection among them (selection).

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

// models is the fixed part of the model controller: the providers and
// their joint catalog. It is immutable after newModels, but for pick,
// which runs before the runtime starts.
type models struct {
	providers map[string]*providerEntry // by name
	catalog   []protocol.ModelDescriptor
	initial   protocol.ModelDescriptor
	window    int // sim context window
	// textOnly holds the names and ids of the models that take no images
	// (Options.TextOnlyModels).
	textOnly map[string]bool
}

// takesImages reports whether model d takes image input: it is named
// neither in Options.TextOnlyModels (by name or id) nor among its own
// provider's ProviderSpec.TextOnlyModels.
func (m *models) takesImages(d protocol.ModelDescriptor) bool {
	if e := m.entry(d); e != nil && e.textOnly[d.Model] {
		return false
	}
	return !m.textOnly[d.ID] && !m.textOnly[d.Model]
}

// providerEntry is one provider the runtime may call.
type providerEntry struct {
	name, kind string
	real       provider.Provider // nil for sim, which is made per turn (see runtime.providerLocked)
	prices     map[string]Price
	textOnly   map[string]bool // its models that take no images (ProviderSpec.TextOnlyModels)
}

// specs is what opts configures: Options.Providers, or else the one
// provider of the single-provider fields.
func specs(opts Options) []ProviderSpec {
	if len(opts.Providers) > 0 {
		return opts.Providers
	}
	sp := ProviderSpec{Name: opts.Provider, Kind: opts.Provider, BaseURL: opts.BaseURL,
		APIKey: opts.APIKey, APIKeyEnv: opts.APIKeyEnv, Prices: opts.Prices}
	if opts.Provider != providerSim && opts.ProviderModel != "" {
		sp.Models = []string{opts.ProviderModel}
	}
	return []ProviderSpec{sp}
}

// newModels builds every provider of opts and picks the initial model. The
// API keys go to the providers only.
func newModels(opts Options, log *slog.Logger) (*models, error) {
	m := &models{providers: map[string]*providerEntry{}, window: opts.ContextWindow, textOnly: map[string]bool{}}
	for _, name := range opts.TextOnlyModels {
		m.textOnly[name] = true
	}
	for _, sp := range specs(opts) {
		if _, dup := m.providers[sp.Name]; dup || sp.Name == "" || strings.Contains(sp.Name, "/") {
			return nil, fmt.Errorf("%w: provider name %q is empty, repeated or holds a /", ErrInvalidOptions, sp.Name)
		}
		e := &providerEntry{name: sp.Name, kind: sp.Kind, prices: sp.Prices, textOnly: map[string]bool{}}
		for _, name := range sp.TextOnlyModels {
			e.textOnly[name] = true
		}
		if sp.Kind == providerSim {
			for _, d := range simCatalog(opts.ContextWindow) {
				if len(sp.Models) == 0 || slices.Contains(sp.Models, d.Model) {
					m.catalog = append(m.catalog, protocol.ModelDescriptor{ID: sp.Name + "/" + d.Model, Provider: sp.Name, Model: d.Model, ContextWindow: d.ContextWindow})
				}
			}
		} else {
			p, err := provider.New(provider.Config{
				Name:       sp.Kind,
				BaseURL:    sp.BaseURL,
				Model:      firstOr(sp.Models, ""),
				APIKey:     sp.APIKey,
				MaxRetries: opts.MaxRetries,
			})
			if err != nil {
				return nil, fmt.Errorf("%w: provider %s: %w", ErrInvalidOptions, sp.Name, err)
			}
			e.real = p
			names := sp.Models
			if len(names) == 0 {
				for _, d := range p.Models() {
					names = append(names, d.Model)
				}
			}
			for _, name := range names {
				m.catalog = append(m.catalog, provider.Describe(sp.Name, sp.Kind, name))
			}
		}
		m.providers[sp.Name] = e
	}
	if len(m.catalog) == 0 {
		return nil, fmt.Errorf("%w: the providers offer no models", ErrInvalidOptions)
	}
	m.initial = m.catalog[0]
	if len(opts.Providers) == 0 && opts.Provider == providerSim && opts.ProviderModel != "" {
		m.initial = m.pick("", opts.ProviderModel, m.initial, log)
	}
	if opts.Model != "" || opts.ModelProvider != "" {
		m.initial = m.pick(opts.ModelProvider, opts.Model, m.initial, log)
	}
	return m, nil
}

// pick resolves a configured selection: the model sel (an id or a model
// name; "" for the provider's first) of provider prov ("" for any). A real
// provider serves any model name it is asked for (which joins the
// catalog); an unknown provider or sim model is logged and def is kept.
func (m *models) pick(prov, sel string, def protocol.ModelDescriptor, log *slog.Logger) protocol.ModelDescriptor {
	if prov == "" {
		if d, ok := m.find(sel); ok {
			return d
		}
		prov = def.Provider
	}
	e := m.providers[prov]
	if e == nil {
		log.Warn("unknown provider; keeping the default", "provider", prov, "default", def.ID)
		return def
	}
	name := strings.TrimPrefix(sel, prov+"/")
	for _, d := range m.catalog {
		if d.Provider == prov && (name == "" || d.Model == name) {
			return d
		}
	}
	if e.real == nil || name == "" {
		log.Warn("unknown sim model; keeping the default", "model", sel, "default", def.ID)
		return def
	}
	d := provider.Describe(prov, e.kind, name)
	m.catalog = append(m.catalog, d)
	return d
}

// find returns the catalog entry whose id, or else whose model name, is
// sel (the first such: the default provider's comes first).
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

// keyVars names the variables holding the providers' keys of opts, which
// bash commands run without.
func keyVars(opts Options) []string {
	var out []string
	for _, sp := range specs(opts) {
		if sp.APIKeyEnv != "" {
			out = append(out, sp.APIKeyEnv)
		}
	}
	return out
}

// firstOr is the first of list, or def when it is empty.
func firstOr(list []string, def string) string {
	if len(list) == 0 {
		return def
	}
	return list[0]
}

// entry is the provider of d.
func (m *models) entry(d protocol.ModelDescriptor) *providerEntry {
	return m.providers[d.Provider]
}

// levels is the reasoning catalog of d, nil when it has none.
func (m *models) levels(d protocol.ModelDescriptor) []provider.Level {
	e := m.entry(d)
	if e == nil || e.real == nil {
		return simLevels(d.Model)
	}
	return e.real.ReasoningLevels(d.Model)
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
	if reasoning != "" && hasLevel(m.levels(s.active), reasoning) {
		s.reasoning = reasoning
	}
	return s
}

// capabilitiesLocked is the feature set for hello, sync and model_changed:
// the reasoning controls only while the active model has levels, image
// input only while it takes images.
func (s *selection) capabilitiesLocked() []string {
	return capabilities(s.models, s.active)
}

// capabilities is the feature set while model is active.
func capabilities(m *models, model protocol.ModelDescriptor) []string {
	caps := []string{capStreamingDeltas, capModeCatalog, capModeSwitch, capModelCatalog, capModelSwitch}
	if len(m.levels(model)) > 0 {
		caps = append(caps, capReasoningCatalog, capReasoningSwitch)
	}
	if m.takesImages(model) {
		caps = append(caps, protocol.CapImageInput)
	}
	return caps
}

// imagesLocked reports whether the active model takes images.
func (s *selection) imagesLocked() bool {
	return s.models.takesImages(s.active)
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
		if s.reasoning != "" && !hasLevel(s.models.levels(d), s.reasoning) {
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
	levels := s.models.levels(s.active)
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
	levels := s.models.levels(s.active)
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
	levels := s.models.levels(s.active)
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
	return ok && d.ID != s.active.ID && s.reasoning != "" && !hasLevel(s.models.levels(d), s.reasoning)
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
