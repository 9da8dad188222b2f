package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Provider kinds: the embedded offline sim, any OpenAI-compatible server
// (chat completions), and Anthropic's Messages API.
const (
	ProviderSim       = "sim"
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// SimModels is the sim's model catalog, in order (docs/sim.md). The
// reference runtime defines the same two names; a sim provider lists no
// others.
var SimModels = []string{"sim", "sim-think"}

// Default models of a real provider configured without any: the ones the
// reference runtime's providers use when none is named.
const (
	defaultOpenAIModel    = "gpt-4.1"
	defaultAnthropicModel = "claude-sonnet-4-5"
)

// ProvidersEnv is the variable the daemon exports its `providers:` mapping
// in (as JSON) to the runtimes it starts, so that a runtime serves the
// providers the daemon validated and announced, whatever the file says by
// the time the runtime starts. It replaces the file's mapping.
const ProvidersEnv = "SHARD_PROVIDERS"

// ProviderEntry is one entry of the config file's `providers:` mapping: a
// model service the agents of this daemon may run on, next to the one the
// `provider:` block configures (docs/protocol.md §13, providers).
type ProviderEntry struct {
	// Kind is sim, openai or anthropic. Default: the entry's name when it
	// is one of those.
	Kind string `yaml:"kind" json:"kind,omitempty"`
	// BaseURL is the service's endpoint (an http or https URL); empty
	// means the service's own. Ignored by sim.
	BaseURL string `yaml:"base_url" json:"base_url,omitempty"`
	// APIKeyEnv names the environment variable holding the key; empty
	// means the kind's conventional one. The key itself is never
	// configuration, and is never exported, logged or stored.
	APIKeyEnv string `yaml:"api_key_env" json:"api_key_env,omitempty"`
	// Models are the models this provider offers, the first its default.
	// Empty means the kind's default model (both sim models for sim).
	Models []string `yaml:"models" json:"models,omitempty"`
	// Prices gives the cost of its models, in provider.prices' format.
	Prices string `yaml:"prices" json:"prices,omitempty"`
	// TextOnlyModels are those of Models that take no image input: a
	// prompt with images to one is refused UNSUPPORTED and its runtime
	// does not offer image-input (docs/protocol.md §13 P4). They are this
	// provider's only: the same model name on another provider still takes
	// images. Empty: every model takes images (provider.text_only_models
	// aside, which names models of any provider).
	TextOnlyModels []string `yaml:"text_only_models" json:"text_only_models,omitempty"`
}

// Provider is one provider of the effective set (Config.ProviderSet): its
// name, which ModelDescriptor.provider and AgentInfo.provider carry, and
// its entry with every default applied.
type Provider struct {
	// Name is the `providers:` key, or provider.name for the block.
	Name string
	ProviderEntry
}

// providerNamePattern keeps a provider name printable, short and free of
// the "/" that separates it from the model in a descriptor id.
var providerNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// isProviderKind reports whether k names a provider kind.
func isProviderKind(k string) bool {
	return k == ProviderSim || k == ProviderOpenAI || k == ProviderAnthropic
}

// withDefaults is e with its kind and models filled in for name.
func (e ProviderEntry) withDefaults(name string) ProviderEntry {
	if e.Kind == "" && isProviderKind(name) {
		e.Kind = name
	}
	e.Models = slices.Clone(e.Models)
	e.TextOnlyModels = slices.Clone(e.TextOnlyModels)
	if len(e.Models) == 0 {
		switch e.Kind {
		case ProviderSim:
			e.Models = slices.Clone(SimModels)
		case ProviderOpenAI:
			e.Models = []string{defaultOpenAIModel}
		case ProviderAnthropic:
			e.Models = []string{defaultAnthropicModel}
		}
	}
	return e
}

// validate reports what is wrong with the entry named name, or nil.
func (e ProviderEntry) validate(name string) error {
	if !providerNamePattern.MatchString(name) {
		return fmt.Errorf("providers.%s: the name must match %s", name, providerNamePattern)
	}
	d := e.withDefaults(name)
	if !isProviderKind(d.Kind) {
		return fmt.Errorf("providers.%s: kind %q: want sim, openai or anthropic", name, e.Kind)
	}
	if reason := httpURL(e.BaseURL); reason != "" {
		return fmt.Errorf("providers.%s.base_url: %s", name, reason)
	}
	if strings.ContainsAny(e.APIKeyEnv, "=\x00") {
		return fmt.Errorf("providers.%s.api_key_env: %q is not a variable name", name, e.APIKeyEnv)
	}
	seen := map[string]bool{}
	for _, m := range d.Models {
		switch {
		case m == "" || strings.TrimSpace(m) != m:
			return fmt.Errorf("providers.%s.models: %q is not a model name", name, m)
		case seen[m]:
			return fmt.Errorf("providers.%s.models: %q is listed twice", name, m)
		case d.Kind == ProviderSim && !slices.Contains(SimModels, m):
			return fmt.Errorf("providers.%s.models: the sim has no model %q (it has %s)", name, m, strings.Join(SimModels, ", "))
		}
		seen[m] = true
	}
	// A text-only model must be one the entry offers: a name that is not
	// is a typo, which would otherwise leave the model taking images.
	textOnly := map[string]bool{}
	for _, m := range d.TextOnlyModels {
		switch {
		case textOnly[m]:
			return fmt.Errorf("providers.%s.text_only_models: %q is listed twice", name, m)
		case !seen[m]:
			return fmt.Errorf("providers.%s.text_only_models: %q is not among its models (%s)", name, m, strings.Join(d.Models, ", "))
		}
		textOnly[m] = true
	}
	if _, err := ParsePrices(e.Prices); err != nil {
		return fmt.Errorf("providers.%s.prices: %w", name, err)
	}
	return nil
}

// providersLayer reads the `providers:` mapping of the YAML file at path
// (file only, like `runtimes:`: its names are free-form). A missing file
// has none.
func providersLayer(path string) (map[string]ProviderEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	if len(data) == 0 {
		return nil, nil
	}
	var doc struct {
		Providers map[string]ProviderEntry `yaml:"providers"`
		Rest      map[string]any           `yaml:",inline"` // the other settings: fileLayer's
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelt provider field is an error
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w %s: providers: %w", ErrFile, path, err)
	}
	for name, e := range doc.Providers {
		if err := e.validate(name); err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrFile, path, err)
		}
	}
	return doc.Providers, nil
}

// ParseProviders decodes the `providers:` mapping from its JSON form (the
// value of ProvidersEnv) and validates every entry.
func ParseProviders(data []byte) (map[string]ProviderEntry, error) {
	var out map[string]ProviderEntry
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, ProvidersEnv, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: %s: trailing data", ErrInvalid, ProvidersEnv)
	}
	for name, e := range out {
		if err := e.validate(name); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, ProvidersEnv, err)
		}
	}
	return out, nil
}

// ProvidersJSON is the JSON form of c.Providers, for ProvidersEnv: "{}"
// for none, so that a runtime never reads a mapping the file gained after
// the daemon started. It holds names of key variables, never keys.
func (c *Config) ProvidersJSON() string {
	if len(c.Providers) == 0 {
		return "{}"
	}
	b, err := json.Marshal(c.Providers)
	if err != nil {
		panic(err) // strings and string slices always marshal
	}
	return string(b)
}

// isProvidersKey reports whether a flattened file key belongs to the
// `providers:` mapping, which providersLayer reads.
func isProvidersKey(key string) bool {
	return key == "providers" || strings.HasPrefix(key, "providers.")
}

// ProviderSet is the effective set of providers, the default first: the
// one provider.name names (a `providers:` entry of that name, or else the
// `provider:` block itself, of kind provider.name), then the other
// `providers:` entries by name. Every entry has its defaults applied; the
// block's provider.model is its model (for sim and for an entry it picks
// the default model instead: DefaultModel).
func (c *Config) ProviderSet() []Provider {
	name := c.Provider.Name
	var def ProviderEntry
	if e, ok := c.Providers[name]; ok {
		def = e.withDefaults(name)
	} else {
		def = ProviderEntry{Kind: name, BaseURL: c.Provider.BaseURL, APIKeyEnv: c.Provider.APIKeyEnv, Prices: c.Provider.Prices}
		if c.Provider.Model != "" && name != ProviderSim {
			def.Models = []string{c.Provider.Model}
		}
		def = def.withDefaults(name)
	}
	out := []Provider{{Name: name, ProviderEntry: def}}
	for _, n := range slices.Sorted(maps.Keys(c.Providers)) {
		if n != name {
			out = append(out, Provider{Name: n, ProviderEntry: c.Providers[n].withDefaults(n)})
		}
	}
	return out
}

// DefaultModel is what an agent created without a provider or model runs
// on: the default provider and provider.model when it offers it, else its
// first model.
func (c *Config) DefaultModel() (provider, model string) {
	def := c.ProviderSet()[0]
	if slices.Contains(def.Models, c.Provider.Model) {
		return def.Name, c.Provider.Model
	}
	return def.Name, def.Models[0]
}

// validateProviders checks provider.name and provider.model against the
// `providers:` mapping.
func (c *Config) validateProviders() error {
	name := c.Provider.Name
	_, isEntry := c.Providers[name]
	switch {
	case isEntry:
		if c.Provider.BaseURL != "" || c.Provider.APIKeyEnv != "" || c.Provider.Prices != "" {
			return invalid("provider.name", "", fmt.Sprintf("names providers.%s, which sets base_url, api_key_env and prices itself; remove them from provider", name))
		}
	case !isProviderKind(name):
		return invalid("provider.name", "", fmt.Sprintf("want sim, openai, anthropic or a name under providers:, got %q", name))
	}
	if m := c.Provider.Model; m != "" && isEntry {
		// The block's own model is its catalog; an unknown sim model is
		// the runtime's to ignore, as it always was.
		models := c.ProviderSet()[0].Models
		if !slices.Contains(models, m) {
			return invalid("provider.model", "", fmt.Sprintf("%q is not among providers.%s.models (%s)", m, name, strings.Join(models, ", ")))
		}
	}
	return nil
}

// envValue is the value of variable name in environ (os.Environ's form; the
// last one wins, as exec.Cmd's deduplication keeps it), "" when unset.
func envValue(environ []string, name string) string {
	var v string
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}
