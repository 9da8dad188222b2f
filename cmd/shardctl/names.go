package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// Names everywhere: wherever a command takes an agent id it also takes the
// agent's name, a subagent's alias or display name, or a unique prefix of
// its id (as git takes a short sha). The daemon only knows ids, so
// shardctl resolves the argument against agent.list first.
//
// Choices: a whole id ("agent-" and a 26-character ULID) is used as given,
// without asking; an exact id wins over everything, then an exact name,
// alias, display name or title (names compare case-insensitively, as the daemon
// compares aliases), then an id prefix. Two or more candidates at the
// first level that matches is an error that lists them (exit 1). An
// argument nothing matches is passed on as given, so the daemon answers
// NOT_FOUND in its own words.

// ulidLen is the length of the ULID part of an id (see internal/ids).
const ulidLen = 26

// wholeID reports whether s is a complete id of kind prefix.
func wholeID(s, prefix string) bool {
	return ids.HasPrefix(s, prefix) && len(s) == len(prefix)+1+ulidLen
}

// ambiguousError lists the candidates of an ambiguous handle.
type ambiguousError struct {
	handle     string
	candidates []protocol.AgentInfo
}

func (e *ambiguousError) Error() string {
	var cs []string
	for _, a := range e.candidates {
		cs = append(cs, fmt.Sprintf("%s (%s)", a.AgentID, agentName(a)))
	}
	return fmt.Sprintf("%q names %d agents; use an id: %s", e.handle, len(e.candidates), strings.Join(cs, ", "))
}

// resolveAgent turns a handle into an agent id (see above).
func resolveAgent(ctx context.Context, conn *client.Conn, handle string) (string, error) {
	if handle == "" || wholeID(handle, ids.Agent) {
		return handle, nil
	}
	var data protocol.AgentListData
	if err := readAllAgents(ctx, conn, &data); err != nil {
		return "", fmt.Errorf("resolve %q: %w", handle, err)
	}
	return matchAgent(data.Agents, handle)
}

// matchAgent is resolveAgent against a list.
func matchAgent(agents []protocol.AgentInfo, handle string) (string, error) {
	levels := []func(a protocol.AgentInfo) bool{
		func(a protocol.AgentInfo) bool { return a.AgentID == handle },
		func(a protocol.AgentInfo) bool {
			return slices.ContainsFunc([]string{a.Name, a.Alias, a.DisplayName, a.Title}, func(n string) bool {
				return n != "" && strings.EqualFold(n, handle)
			})
		},
		func(a protocol.AgentInfo) bool {
			return strings.HasPrefix(a.AgentID, handle) ||
				strings.HasPrefix(strings.TrimPrefix(a.AgentID, ids.Agent+"-"), handle)
		},
	}
	for _, match := range levels {
		var found []protocol.AgentInfo
		for _, a := range agents {
			if match(a) {
				found = append(found, a)
			}
		}
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0].AgentID, nil
		default:
			return "", failed(&ambiguousError{handle: handle, candidates: found})
		}
	}
	return handle, nil
}

// shortIDs shortens ids for a table as git shortens shas: each keeps its
// kind prefix and the fewest ULID characters (at least minShortID) that no
// other id of the list shares, so that every short id resolves back.
func shortIDs(all []string) map[string]string {
	out := make(map[string]string, len(all))
	for _, id := range all {
		prefix, rest, ok := strings.Cut(id, "-")
		if !ok || len(rest) <= minShortID {
			out[id] = id
			continue
		}
		n := minShortID
		for ; n < len(rest); n++ {
			cand := prefix + "-" + rest[:n]
			if !slices.ContainsFunc(all, func(o string) bool { return o != id && strings.HasPrefix(o, cand) }) {
				break
			}
		}
		out[id] = prefix + "-" + rest[:n]
	}
	return out
}

// minShortID is the shortest ULID part of a short id: its first 10
// characters are the millisecond timestamp, so ids of one burst share
// them, and 12 leaves two random characters.
const minShortID = 12

// resolveKnownAgent is resolveAgent for a filter (--parent): a handle that
// names no agent is NOT_FOUND rather than a filter that matches nothing.
func resolveKnownAgent(ctx context.Context, conn *client.Conn, handle string) (string, error) {
	var data protocol.AgentListData
	if err := readAllAgents(ctx, conn, &data); err != nil {
		return "", fmt.Errorf("resolve %q: %w", handle, err)
	}
	id, err := matchAgent(data.Agents, handle)
	if err != nil {
		return "", err
	}
	if !slices.ContainsFunc(data.Agents, func(a protocol.AgentInfo) bool { return a.AgentID == id }) {
		return "", protocol.Errorf(protocol.CodeNotFound, "no agent %q", handle)
	}
	return id, nil
}
