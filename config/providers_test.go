package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestProvidersFromFile reads a `providers:` mapping next to the legacy
// `provider:` block: the block stays the default provider, first, and the
// entries follow by name with their kinds and models defaulted.
func TestProvidersFromFile(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, `
provider:
  name: openai
  base_url: http://127.0.0.1:9/v1
  model: gpt-5
  prices: "gpt-5=1/2"
providers:
  local:
    kind: openai
    base_url: http://127.0.0.1:8/v1
    api_key_env: LOCAL_KEY
    models: [qwen3, llama]
    prices: "qwen3=0/0"
  anthropic:
    models: [claude-opus-4-1]
  sim: {}
`)
	c, err := f.load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Provider{
		{Name: "openai", ProviderEntry: ProviderEntry{Kind: "openai", BaseURL: "http://127.0.0.1:9/v1", Models: []string{"gpt-5"}, Prices: "gpt-5=1/2"}},
		{Name: "anthropic", ProviderEntry: ProviderEntry{Kind: "anthropic", Models: []string{"claude-opus-4-1"}}},
		{Name: "local", ProviderEntry: ProviderEntry{Kind: "openai", BaseURL: "http://127.0.0.1:8/v1", APIKeyEnv: "LOCAL_KEY", Models: []string{"qwen3", "llama"}, Prices: "qwen3=0/0"}},
		{Name: "sim", ProviderEntry: ProviderEntry{Kind: "sim", Models: []string{"sim", "sim-think"}}},
	}
	if got := c.ProviderSet(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ProviderSet = %+v\nwant %+v", got, want)
	}
	// The runtime receives the mapping through ProvidersEnv and reads
	// the same set from it, whatever the file holds by then.
	env := []string{ProvidersEnv + "=" + c.ProvidersJSON()}
	f.writeFile(t, "provider:\n  name: openai\n  base_url: http://127.0.0.1:9/v1\n  model: gpt-5\n  prices: \"gpt-5=1/2\"\n")
	c2, err := f.load(t, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := c2.ProviderSet(); !reflect.DeepEqual(got, want) {
		t.Fatalf("from %s: ProviderSet = %+v\nwant %+v", ProvidersEnv, got, want)
	}
}

// TestProvidersLegacyBlock keeps the single `provider:` block working
// unchanged: one provider, its model the catalog, sim by default.
func TestProvidersLegacyBlock(t *testing.T) {
	f := newFixture(t)
	c, err := f.load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.ProviderSet(), []Provider{{Name: "sim", ProviderEntry: ProviderEntry{Kind: "sim", Models: []string{"sim", "sim-think"}}}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("default ProviderSet = %+v, want %+v", got, want)
	}
	if c.ProvidersJSON() != "{}" {
		t.Fatalf("ProvidersJSON = %q, want {} without providers:", c.ProvidersJSON())
	}
	// A runtime of this daemon ignores a mapping the file gained since.
	f.writeFile(t, "providers:\n  late:\n    kind: openai\n")
	late, err := f.load(t, nil, []string{ProvidersEnv + "=" + c.ProvidersJSON()})
	if err != nil {
		t.Fatal(err)
	}
	if len(late.ProviderSet()) != 1 {
		t.Fatalf("with %s={} the file's providers: still counted: %+v", ProvidersEnv, late.ProviderSet())
	}
	f.writeFile(t, "")
	c, err = f.load(t, []string{"--provider.name=anthropic", "--provider.api-key-env=MY_KEY"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.ProviderSet(), []Provider{{Name: "anthropic", ProviderEntry: ProviderEntry{Kind: "anthropic", APIKeyEnv: "MY_KEY", Models: []string{"claude-sonnet-4-5"}}}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("anthropic ProviderSet = %+v, want %+v", got, want)
	}
	c, err = f.load(t, []string{"--provider.model=sim-think"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, m := c.DefaultModel(); p != "sim" || m != "sim-think" {
		t.Fatalf("sim with provider.model sim-think: DefaultModel = %s, %s", p, m)
	}
}

// TestProvidersDefaultEntry lets provider.name name an entry, which then
// configures the default provider; provider.model picks its default model.
func TestProvidersDefaultEntry(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, `
provider:
  name: local
  model: llama
providers:
  local:
    kind: openai
    models: [qwen3, llama]
`)
	c, err := f.load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Provider{{Name: "local", ProviderEntry: ProviderEntry{Kind: "openai", Models: []string{"qwen3", "llama"}}}}
	if got := c.ProviderSet(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ProviderSet = %+v, want %+v", got, want)
	}
	if p, m := c.DefaultModel(); p != "local" || m != "llama" {
		t.Fatalf("DefaultModel = %s, %s, want local, llama", p, m)
	}
}

// TestProvidersTextOnlyModels reads an entry's text_only_models with the
// rest of it, carries them to the runtime through ProvidersEnv, and keeps
// them that entry's: the same model name elsewhere has none, and the
// block's provider.text_only_models still reads as before.
func TestProvidersTextOnlyModels(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, `
provider:
  name: sim
  text_only_models: "sim-think;other/x"
providers:
  local:
    kind: openai
    models: [qwen3, llava]
    text_only_models: [qwen3]
  other:
    kind: openai
    models: [qwen3]
`)
	c, err := f.load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Provider{
		{Name: "sim", ProviderEntry: ProviderEntry{Kind: "sim", Models: []string{"sim", "sim-think"}}},
		{Name: "local", ProviderEntry: ProviderEntry{Kind: "openai", Models: []string{"qwen3", "llava"}, TextOnlyModels: []string{"qwen3"}}},
		{Name: "other", ProviderEntry: ProviderEntry{Kind: "openai", Models: []string{"qwen3"}}},
	}
	if got := c.ProviderSet(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ProviderSet = %+v\nwant %+v", got, want)
	}
	if got := ParseModelList(c.Provider.TextOnlyModels); !reflect.DeepEqual(got, []string{"sim-think", "other/x"}) {
		t.Fatalf("provider.text_only_models = %q", got)
	}
	if !strings.Contains(c.ProvidersJSON(), `"text_only_models":["qwen3"]`) {
		t.Fatalf("ProvidersJSON = %s, lacks local's text_only_models", c.ProvidersJSON())
	}
	f.writeFile(t, "")
	c2, err := f.load(t, nil, []string{ProvidersEnv + "=" + c.ProvidersJSON()})
	if err != nil {
		t.Fatal(err)
	}
	if got := c2.ProviderSet(); !reflect.DeepEqual(got, want) {
		t.Fatalf("from %s: ProviderSet = %+v\nwant %+v", ProvidersEnv, got, want)
	}

	// An entry named by provider.name brings its own text-only models.
	f.writeFile(t, "provider:\n  name: local\nproviders:\n  local:\n    kind: openai\n    models: [a, b]\n    text_only_models: [b]\n")
	c, err = f.load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ProviderSet()[0].TextOnlyModels; !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("the default entry's text_only_models = %q, want [b]", got)
	}
}

// TestProvidersInvalid refuses providers that could not serve a model,
// naming what is wrong.
func TestProvidersInvalid(t *testing.T) {
	for body, want := range map[string]string{
		"providers:\n  x:\n    base_url: http://h/\n":                                                `kind "": want sim, openai or anthropic`,
		"providers:\n  x:\n    kind: weird\n":                                                        "want sim, openai or anthropic",
		"providers:\n  Bad/Name:\n    kind: openai\n":                                                "the name must match",
		"providers:\n  x:\n    kind: openai\n    bogus: 1\n":                                         "bogus",
		"providers:\n  x:\n    kind: openai\n    base_url: ftp://h\n":                                "base_url",
		"providers:\n  x:\n    kind: sim\n    models: [gpt-4.1]\n":                                   "the sim has no model",
		"providers:\n  x:\n    kind: openai\n    models: [a, a]\n":                                   "listed twice",
		"providers:\n  x:\n    kind: openai\n    prices: \"a=1\"\n":                                  "prices",
		"providers:\n  x:\n    kind: openai\n    models: [a]\n    text_only_models: [b]\n":           `text_only_models: "b" is not among its models (a)`,
		"providers:\n  x:\n    kind: openai\n    text_only_models: [gpt-4.1, gpt-4.1]\n":             "text_only_models: \"gpt-4.1\" is listed twice",
		"providers:\n  x:\n    kind: sim\n    text_only_models: sim\n":                               "line 4: cannot unmarshal !!str `sim` into []string", // a list, unlike provider.text_only_models
		"provider:\n  name: nowhere\n":                                                               "want sim, openai, anthropic or a name under providers:",
		"provider:\n  name: x\n  model: c\nproviders:\n  x:\n    kind: openai\n    models: [a, b]\n": "is not among providers.x.models",
		"provider:\n  name: x\n  base_url: http://h/\nproviders:\n  x:\n    kind: openai\n":          "sets base_url, api_key_env and prices itself",
	} {
		f := newFixture(t)
		f.writeFile(t, body)
		_, err := f.load(t, nil, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to say %q", body, err, want)
		}
	}
}

// TestParseProvidersInvalid refuses a ProvidersEnv value that is not a
// valid mapping.
func TestParseProvidersInvalid(t *testing.T) {
	for _, raw := range []string{`{`, `[]`, `{"x":{"kind":"weird"}}`, `{"x":{"kind":"openai","key":"k"}}`, `{} {}`,
		`{"x":{"kind":"openai","models":["a"],"text_only_models":["b"]}}`} {
		if _, err := ParseProviders([]byte(raw)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", raw, err)
		}
	}
}

// FuzzParseProviders: the decoder of ProvidersEnv never panics, and what
// it accepts survives a round trip.
func FuzzParseProviders(f *testing.F) {
	f.Add([]byte(`{"local":{"kind":"openai","base_url":"http://h/v1","models":["a","b"],"prices":"a=1/2"}}`))
	f.Add([]byte(`{"sim":{}}`))
	f.Add([]byte(`{"local":{"kind":"openai","models":["a","b"],"text_only_models":["b"]}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseProviders(data)
		if err != nil {
			return
		}
		c := &Config{Providers: m}
		if len(m) == 0 {
			if c.ProvidersJSON() != "{}" {
				t.Fatalf("ProvidersJSON of none = %q", c.ProvidersJSON())
			}
			return
		}
		again, err := ParseProviders([]byte(c.ProvidersJSON()))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip: %v, %+v != %+v", err, again, m)
		}
	})
}
