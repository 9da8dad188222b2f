package daemon

import (
	"errors"

	"github.com/shard-dev/shard/gateway"
	"github.com/shard-dev/shard/store"
)

// storeCredentials is the gateway's view of the store: gateway.Credentials
// over the security buckets. The gateway knows no database; the record
// types have the same fields on both sides, so each crossing is a type
// conversion, and store.ErrNotFound becomes gateway.ErrNotFound.
type storeCredentials struct{ st *store.Store }

var _ gateway.Credentials = storeCredentials{}

// credErr makes a store error one the gateway can recognise: a missing
// record also matches gateway.ErrNotFound. The text stays the store's
// (clients read it in NOT_FOUND messages).
func credErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound{err}
	}
	return err
}

// notFound is a store.ErrNotFound error that also matches
// gateway.ErrNotFound, with the store error's text.
type notFound struct{ err error }

func (e notFound) Error() string   { return e.err.Error() }
func (e notFound) Unwrap() []error { return []error{e.err, gateway.ErrNotFound} }

// EnsurePrincipal implements gateway.Credentials.
func (c storeCredentials) EnsurePrincipal(p gateway.Principal) (gateway.Principal, error) {
	out, err := c.st.EnsurePrincipal(store.Principal(p))
	return gateway.Principal(out), credErr(err)
}

// Enroll implements gateway.Credentials.
func (c storeCredentials) Enroll(b gateway.Browser, ws gateway.WebSession) error {
	return credErr(c.st.Enroll(store.Browser(b), store.WebSession(ws)))
}

// ListBrowsers implements gateway.Credentials.
func (c storeCredentials) ListBrowsers() ([]gateway.Browser, error) {
	all, err := c.st.ListBrowsers()
	return convertAll(all, func(b store.Browser) gateway.Browser { return gateway.Browser(b) }), credErr(err)
}

// GetWebSession implements gateway.Credentials.
func (c storeCredentials) GetWebSession(id string) (gateway.WebSession, error) {
	ws, err := c.st.GetWebSession(id)
	return gateway.WebSession(ws), credErr(err)
}

// ListWebSessions implements gateway.Credentials.
func (c storeCredentials) ListWebSessions() ([]gateway.WebSession, error) {
	all, err := c.st.ListWebSessions()
	return convertAll(all, func(ws store.WebSession) gateway.WebSession { return gateway.WebSession(ws) }), credErr(err)
}

// TouchWebSession implements gateway.Credentials.
func (c storeCredentials) TouchWebSession(id string, at int64) error {
	return credErr(c.st.TouchWebSession(id, at))
}

// DeleteWebSession implements gateway.Credentials.
func (c storeCredentials) DeleteWebSession(id string) error {
	return credErr(c.st.DeleteWebSession(id))
}

// DeleteWebSessions implements gateway.Credentials.
func (c storeCredentials) DeleteWebSessions(drop func(gateway.WebSession) bool) ([]string, error) {
	var f func(store.WebSession) bool
	if drop != nil {
		f = func(ws store.WebSession) bool { return drop(gateway.WebSession(ws)) }
	}
	ids, err := c.st.DeleteWebSessions(f)
	return ids, credErr(err)
}

// CreateAPICredential implements gateway.Credentials.
func (c storeCredentials) CreateAPICredential(cred gateway.APICredential) error {
	return credErr(c.st.CreateAPICredential(store.APICredential(cred)))
}

// GetAPICredential implements gateway.Credentials.
func (c storeCredentials) GetAPICredential(id string) (gateway.APICredential, error) {
	cred, err := c.st.GetAPICredential(id)
	return gateway.APICredential(cred), credErr(err)
}

// ListAPICredentials implements gateway.Credentials.
func (c storeCredentials) ListAPICredentials() ([]gateway.APICredential, error) {
	all, err := c.st.ListAPICredentials()
	return convertAll(all, func(cred store.APICredential) gateway.APICredential { return gateway.APICredential(cred) }), credErr(err)
}

// TouchAPICredential implements gateway.Credentials.
func (c storeCredentials) TouchAPICredential(id string, at int64) error {
	return credErr(c.st.TouchAPICredential(id, at))
}

// RevokeAPICredential implements gateway.Credentials.
func (c storeCredentials) RevokeAPICredential(id string, at int64) (gateway.APICredential, error) {
	cred, err := c.st.RevokeAPICredential(id, at)
	return gateway.APICredential(cred), credErr(err)
}

// convertAll maps a list of store records to the gateway's (nil stays nil).
func convertAll[S, G any](in []S, f func(S) G) []G {
	if in == nil {
		return nil
	}
	out := make([]G, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
