package gateway

import (
	"errors"

	"github.com/shard-dev/shard/protocol"
)

// security answers ws.ticket and the security commands of a local client.
// Errors are *protocol.Error values; none carries a secret.
func (g *Gateway) security(cmd protocol.Command) (any, error) {
	switch c := cmd.(type) {
	case *protocol.WSTicket:
		ticket, exp := g.tickets.Mint()
		return protocol.WSTicketData{Ticket: ticket, ExpiresAt: exp.UnixMilli(), URL: g.BrowserURL() + "/ws"}, nil

	case *protocol.WebEnroll:
		code, exp, principal, err := g.auth.newEnrollCode(c.Note)
		if err != nil {
			return nil, securityErr("web.enroll", err)
		}
		g.log.Info("browser enrollment code issued", "principal_id", principal, "expires_at", exp.UnixMilli())
		return protocol.WebEnrollData{Code: code, URL: g.BrowserURL() + "/enroll#code=" + code,
			ExpiresAt: exp.UnixMilli(), PrincipalID: principal}, nil

	case *protocol.WebSessionsList:
		return g.listSessions()

	case *protocol.WebSessionsRevoke:
		if g.cfg.Credentials == nil {
			return nil, securityErr("web.sessions.revoke", ErrNoStore)
		}
		var ids []string
		if c.All {
			var err error
			if ids, err = g.cfg.Credentials.DeleteWebSessions(nil); err != nil {
				return nil, securityErr("web.sessions.revoke", err)
			}
		} else {
			if err := g.cfg.Credentials.DeleteWebSession(c.SessionID); err != nil {
				return nil, securityErr("web.sessions.revoke", err)
			}
			ids = []string{c.SessionID}
		}
		revoked := make(map[string]bool, len(ids))
		for _, id := range ids {
			revoked[id] = true
		}
		closed := g.closeConns(func(cr credential) bool { return cr.kind == credSession && revoked[cr.id] })
		g.log.Info("browser sessions revoked", "sessions", len(ids), "closed_connections", closed)
		if ids == nil {
			ids = []string{}
		}
		return protocol.WebSessionsRevokeData{Revoked: ids, ClosedConnections: closed}, nil

	case *protocol.TokenCreate:
		token, cred, err := g.auth.createToken(c.Note)
		if err != nil {
			return nil, securityErr("token.create", err)
		}
		g.log.Info("api token created", "token_id", cred.ID)
		return protocol.TokenCreateData{TokenID: cred.ID, Token: token, Note: cred.Note, CreatedAt: cred.CreatedAt}, nil

	case *protocol.TokenList:
		if g.cfg.Credentials == nil {
			return nil, securityErr("token.list", ErrNoStore)
		}
		all, err := g.cfg.Credentials.ListAPICredentials()
		if err != nil {
			return nil, securityErr("token.list", err)
		}
		conns := g.countConns()
		out := protocol.TokenListData{Tokens: make([]protocol.TokenInfo, 0, len(all))}
		for _, t := range all {
			out.Tokens = append(out.Tokens, protocol.TokenInfo{TokenID: t.ID, Note: t.Note, CreatedAt: t.CreatedAt,
				LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt, Connections: conns[t.ID]})
		}
		return out, nil

	case *protocol.TokenRevoke:
		if g.cfg.Credentials == nil {
			return nil, securityErr("token.revoke", ErrNoStore)
		}
		t, err := g.cfg.Credentials.RevokeAPICredential(c.TokenID, g.auth.now().UnixMilli())
		if err != nil {
			return nil, securityErr("token.revoke", err)
		}
		closed := g.closeConns(func(cr credential) bool { return cr.kind == credToken && cr.id == t.ID })
		g.log.Info("api token revoked", "token_id", t.ID, "closed_connections", closed)
		return protocol.TokenRevokeData{TokenID: t.ID, RevokedAt: t.RevokedAt, ClosedConnections: closed}, nil
	}
	return nil, protocol.Errorf(protocol.CodeInternal, "gateway: no local handler for %T", cmd)
}

// listSessions lists live sessions with their browser's metadata.
func (g *Gateway) listSessions() (protocol.WebSessionsListData, error) {
	out := protocol.WebSessionsListData{Sessions: []protocol.WebSessionInfo{}}
	if g.cfg.Credentials == nil {
		return out, securityErr("web.sessions.list", ErrNoStore)
	}
	sessions, err := g.cfg.Credentials.ListWebSessions()
	if err != nil {
		return out, securityErr("web.sessions.list", err)
	}
	browsers, err := g.cfg.Credentials.ListBrowsers()
	if err != nil {
		return out, securityErr("web.sessions.list", err)
	}
	byID := make(map[string]Browser, len(browsers))
	for _, b := range browsers {
		byID[b.ID] = b
	}
	now := g.auth.now().UnixMilli()
	conns := g.countConns()
	for _, s := range sessions {
		if now >= s.ExpiresAt {
			continue
		}
		b := byID[s.BrowserID]
		out.Sessions = append(out.Sessions, protocol.WebSessionInfo{
			SessionID: s.ID, PrincipalID: s.PrincipalID, BrowserID: s.BrowserID, Note: b.Note, UserAgent: b.UserAgent,
			Secure: s.Secure, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt, LastUsedAt: s.LastUsedAt,
			Connections: conns[s.ID],
		})
	}
	return out, nil
}

// securityErr maps a Credentials or authority error to a protocol error.
func securityErr(op string, err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return protocol.Errorf(protocol.CodeNotFound, "%s: %w", op, err)
	case errors.Is(err, ErrNoStore):
		return protocol.Errorf(protocol.CodeInternal, "%s: %w", op, err)
	}
	return protocol.Errorf(protocol.CodeInternal, "%s: %w", op, err)
}
