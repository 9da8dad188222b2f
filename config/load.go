package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// RegisterFlags defines a flag for every setting on flags: the long form
// --<key> with underscores as dashes (--kill.abort-grace), plus the short
// aliases --web-host, --web-port, --log-level and the remote-mode flags
// --public-host, --allowed-origin (repeatable), --allow-insecure-remote and
// --trust-proxy. Each help text states the
// default. Calling it twice on one FlagSet panics (pflag redefinition).
func RegisterFlags(flags *pflag.FlagSet) {
	def := Default("")
	for _, s := range settings() {
		names := []string{flagName(s.key)}
		if s.alias != "" {
			names = append(names, s.alias)
		}
		for i, name := range names {
			usage := s.usage
			if i > 0 {
				usage = "same as --" + names[0]
				// A zero default is stated in the usage text, not by pflag.
				if i := strings.LastIndex(s.usage, "(default "); i >= 0 {
					usage += " " + s.usage[i:]
				}
			}
			switch p := s.field(def).(type) {
			case *string:
				flags.String(name, *p, usage)
			case *int:
				flags.Int(name, *p, usage)
			case *bool:
				flags.Bool(name, *p, usage)
			case *time.Duration:
				flags.Duration(name, *p, usage)
			case *[]string:
				flags.StringSlice(name, *p, usage)
			}
		}
	}
}

// Load builds the Config from its layers: defaults, then the config file,
// then SHARD_* variables from environ, then the flags in flags that the user
// set. flags must already be parsed; it may be nil, and flags RegisterFlags
// did not define are simply absent. environ has os.Environ's form; variables
// not naming a known setting are ignored, and so are empty values. userHome
// is the user's home directory, used only for the default Home.
//
// Home and the config file path come from flags, env or defaults only. The
// default file may be missing; a file named by --config or SHARD_CONFIG
// must exist. Any unknown key or bad value is an error naming the key and
// its source (a *KeyError); the merged result is checked with Validate.
func Load(flags *pflag.FlagSet, environ []string, userHome string) (*Config, error) {
	table := settings()
	set, err := changedFlags(flags, table)
	if err != nil {
		return nil, err
	}
	env, err := envLayer(environ, table)
	if err != nil {
		return nil, err
	}

	home, err := resolveHome(set, env, userHome)
	if err != nil {
		return nil, err
	}
	cfgPath, explicit := filepath.Join(home, "config.yaml"), false
	if f, ok := set[keyConfig]; ok {
		cfgPath, explicit = f.Value.String(), true
	} else if v, ok := env[keyConfig]; ok {
		cfgPath, explicit = v.(string), true
	}
	file, err := fileLayer(cfgPath, explicit, table)
	if err != nil {
		return nil, err
	}

	v := viper.New()
	def := Default("")
	for _, s := range table {
		if !s.notInFile {
			v.SetDefault(s.key, s.get(def))
		}
	}
	// viper has a single config-map layer; merging env after the file
	// puts env above it, as the layering requires.
	if err := v.MergeConfigMap(nest(file)); err != nil {
		return nil, fmt.Errorf("config: merge %s: %w", cfgPath, err)
	}
	if err := v.MergeConfigMap(nest(withoutPathKeys(env))); err != nil {
		return nil, fmt.Errorf("config: merge environment: %w", err)
	}
	for key, f := range set {
		if key == keyHome || key == keyConfig {
			continue
		}
		if err := v.BindPFlag(key, f); err != nil {
			return nil, fmt.Errorf("config: bind flag --%s: %w", f.Name, err)
		}
	}
	v.Set(keyHome, home)
	v.Set(keyConfig, cfgPath)

	var c Config
	if err := v.UnmarshalExact(&c); err != nil {
		return nil, fmt.Errorf("config: decode: %w", err)
	}
	if c.Runtimes, err = runtimesLayer(cfgPath); err != nil {
		return nil, err
	}
	if c.Providers, err = providersLayer(cfgPath); err != nil {
		return nil, err
	}
	if raw := envValue(environ, ProvidersEnv); raw != "" {
		// The daemon's own mapping, exported to its runtimes.
		if c.Providers, err = ParseProviders([]byte(raw)); err != nil {
			return nil, err
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// resolveHome picks Home: --home, else SHARD_HOME, else <userHome>/.shard.
func resolveHome(set map[string]*pflag.Flag, env map[string]any, userHome string) (string, error) {
	switch {
	case set[keyHome] != nil:
		return filepath.Clean(set[keyHome].Value.String()), nil
	case env[keyHome] != nil:
		return filepath.Clean(env[keyHome].(string)), nil
	case userHome != "":
		return filepath.Join(userHome, ".shard"), nil
	}
	return "", fmt.Errorf("%w: set --home or SHARD_HOME", ErrNoHome)
}

// changedFlags returns, by key, the flags the user set, after checking each
// value. A setting given through both its long flag and its alias must have
// one value.
func changedFlags(flags *pflag.FlagSet, table []setting) (map[string]*pflag.Flag, error) {
	set := make(map[string]*pflag.Flag)
	if flags == nil {
		return set, nil
	}
	for _, s := range table {
		var chosen *pflag.Flag
		for _, name := range []string{flagName(s.key), s.alias} {
			f := flags.Lookup(name)
			if name == "" || f == nil || !f.Changed {
				continue
			}
			if chosen != nil && chosen.Value.String() != f.Value.String() {
				return nil, invalid(s.key, "--"+chosen.Name+" and --"+f.Name,
					fmt.Sprintf("set twice with different values %q and %q", chosen.Value.String(), f.Value.String()))
			}
			chosen = f
		}
		if chosen == nil {
			continue
		}
		var raw any = chosen.Value.String()
		if sv, ok := chosen.Value.(pflag.SliceValue); ok {
			raw = sv.GetSlice() // a repeatable flag; String() would add brackets
		}
		if _, err := s.validate(raw, "--"+chosen.Name); err != nil {
			return nil, err
		}
		set[s.key] = chosen
	}
	return set, nil
}

// envLayer returns the parsed values of the SHARD_* variables in environ
// that name a setting. When a variable repeats, the last entry wins, as in
// os/exec.
func envLayer(environ []string, table []setting) (map[string]any, error) {
	byName := make(map[string]setting, len(table))
	for _, s := range table {
		byName[envName(s.key)] = s
	}
	raw := make(map[string]string)
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if _, known := byName[name]; ok && known {
			raw[name] = val
		}
	}
	out := make(map[string]any, len(raw))
	for _, s := range table { // table order: deterministic first error
		val, ok := raw[envName(s.key)]
		if !ok || val == "" {
			continue
		}
		v, err := s.validate(val, "$"+envName(s.key))
		if err != nil {
			return nil, err
		}
		out[s.key] = v
	}
	return out, nil
}

// fileLayer reads the YAML file at path and returns its parsed settings by
// key. A missing file is an empty layer unless explicit.
func fileLayer(path string, explicit bool, table []setting) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrFileNotFound, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	fv := viper.New()
	fv.SetConfigType("yaml")
	if err := fv.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrFile, path, err)
	}

	byKey := make(map[string]setting, len(table))
	sections := make(map[string]bool)
	for _, s := range table {
		byKey[s.key] = s
		for i, r := range s.key {
			if r == '.' {
				sections[s.key[:i]] = true
			}
		}
	}
	keys := fv.AllKeys() // flattened and lower-cased by viper
	slices.Sort(keys)
	out := make(map[string]any, len(keys))
	for _, key := range keys {
		if isRuntimesKey(key) || isProvidersKey(key) {
			continue // runtimesLayer, providersLayer
		}
		raw := fv.Get(key)
		s, known := byKey[key]
		switch {
		case known && s.notInFile:
			return nil, invalid(key, path, fmt.Sprintf("cannot be set in the config file; use --%s or %s", flagName(key), envName(key)))
		case known && raw == nil:
			return nil, invalid(key, path, "no value")
		case known:
			v, err := s.validate(raw, path)
			if err != nil {
				return nil, err
			}
			out[key] = v
		case sections[key] && raw == nil:
			// An empty section ("kill:" with every entry commented out).
		case sections[key]:
			return nil, invalid(key, path, fmt.Sprintf("want a mapping of %s settings, got %v", key, raw))
		default:
			return nil, &KeyError{Key: unknownPrefix(key, byKey, sections), Source: path, Err: ErrUnknownKey}
		}
	}
	return out, nil
}

// unknownPrefix returns the shortest dotted prefix of key that is neither a
// setting nor a section, so that a misspelt section ("webb: {port: 1}") is
// reported as "webb" rather than "webb.port".
func unknownPrefix(key string, byKey map[string]setting, sections map[string]bool) string {
	for i, r := range key {
		if r != '.' {
			continue
		}
		if p := key[:i]; !sections[p] {
			if _, known := byKey[p]; !known {
				return p
			}
		}
	}
	return key
}

// withoutPathKeys drops home and config, which Load sets itself.
func withoutPathKeys(layer map[string]any) map[string]any {
	out := make(map[string]any, len(layer))
	for k, v := range layer {
		if k != keyHome && k != keyConfig {
			out[k] = v
		}
	}
	return out
}

// nest turns {"kill.abort_grace": 5s} into {"kill": {"abort_grace": 5s}},
// the shape viper's config layer holds.
func nest(flat map[string]any) map[string]any {
	out := make(map[string]any)
	for key, v := range flat {
		m := out
		parts := strings.Split(key, ".")
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m[p].(map[string]any)
			if !ok {
				sub = make(map[string]any)
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = v
	}
	return out
}
