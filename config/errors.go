package config

import (
	"errors"
	"fmt"
)

// Sentinels for errors.Is. Errors returned by Load and Validate wrap exactly
// one of them.
var (
	// ErrInvalid marks a setting whose value does not parse or is out of
	// range. It is carried by a *KeyError naming the key.
	ErrInvalid = errors.New("config: invalid value")
	// ErrUnknownKey marks a key in the config file that Shard does not know,
	// usually a typo. It is carried by a *KeyError naming the key.
	ErrUnknownKey = errors.New("config: unknown key")
	// ErrFileNotFound marks a config file named explicitly (--config or
	// SHARD_CONFIG) that does not exist. The default file may be absent.
	ErrFileNotFound = errors.New("config: config file not found")
	// ErrFile marks a config file that exists but cannot be read or parsed.
	ErrFile = errors.New("config: cannot read config file")
	// ErrNoHome marks a missing Shard home: no --home, no SHARD_HOME and no
	// user home directory to default from.
	ErrNoHome = errors.New("config: no home directory")
)

// KeyError reports one bad setting: which key, where the value came from and
// what is wrong with it. errors.Is(err, ErrInvalid) or errors.Is(err,
// ErrUnknownKey) tells the two kinds apart; errors.As recovers the key.
type KeyError struct {
	// Key is the dotted setting name, e.g. "kill.abort_grace".
	Key string
	// Source says where the value came from: a config file path,
	// "$SHARD_KILL_ABORT_GRACE" or "--kill.abort-grace". It is empty when
	// the problem is with a final, merged value (Validate).
	Source string
	// Reason says what is wrong, e.g. `invalid duration "5 parsecs"`.
	Reason string
	// Err is ErrInvalid or ErrUnknownKey.
	Err error
}

// Error renders `config: kill.abort_grace: invalid duration "5 parsecs" (from
// $SHARD_KILL_ABORT_GRACE)` or `config: unknown key "kill.abort_grce" in
// /home/u/.shard/config.yaml`.
func (e *KeyError) Error() string {
	if errors.Is(e.Err, ErrUnknownKey) {
		return fmt.Sprintf("config: unknown key %q in %s", e.Key, e.Source)
	}
	msg := "config: " + e.Key + ": " + e.Reason
	if e.Source != "" {
		msg += " (from " + e.Source + ")"
	}
	return msg
}

// Unwrap returns the sentinel.
func (e *KeyError) Unwrap() error { return e.Err }

// invalid builds the ErrInvalid KeyError for key.
func invalid(key, source, reason string) *KeyError {
	return &KeyError{Key: key, Source: source, Reason: reason, Err: ErrInvalid}
}
