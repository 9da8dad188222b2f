package depsrules

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path of the module the rules are about.
const module = "github.com/shard-dev/shard"

// A rule is one line of the table: either pkgs with notLink (what a
// package links, its tests left out, because that is what ships), or
// imported with onlyBy (who imports a package directly, tests included).
//
// Every name is a pattern: "x" is package x, "x/..." is x and every
// package below it, and a name whose first element has no dot is under
// the module ("actors/..." is github.com/shard-dev/shard/actors/...;
// "..." alone is the whole module).
type rule struct {
	name string // what the rule says; failures start with it

	pkgs    []string // the packages held to notLink
	notLink []string // what pkgs must not import, directly or through other packages
	except  []string // packages notLink does not cover
	// via are packages that pkgs may import although they link what
	// notLink names: what they link is theirs, so a chain through them
	// does not count.
	via []string

	imported []string // packages only onlyBy may import
	onlyBy   []string // the one importers of imported (their tests with them)
}

// rules is the table.
func rules() []rule {
	// daemonCode is what runs only in shardd itself: the actors and the
	// actor system, the gateway, jobs, workspaces, the store and bbolt,
	// supervision, the configuration and the composition root.
	daemonCode := []string{
		"actors/...", "gateway/...", "jobs/...", "workspaces/...", "store/...", "supervisor/...",
		"config/...", "internal/daemon/...",
		"github.com/asynkron/protoactor-go/...", "go.etcd.io/bbolt/...", "github.com/spf13/viper/...",
	}
	return []rule{{
		// The wire types are shared by the daemon, shardctl, the runtimes
		// and every client; they depend on none of them.
		name:    "protocol imports nothing of Shard, protoactor, bbolt or viper",
		pkgs:    []string{"protocol"},
		notLink: []string{"...", "github.com/asynkron/protoactor-go/...", "go.etcd.io/bbolt/...", "github.com/spf13/viper/..."},
		except:  []string{"protocol"},
	}, {
		// The AgentCraft v1 dialect's wire types are a leaf like protocol:
		// a Go client or tool can speak the dialect without the daemon,
		// and the server that will serve it depends on them, not the
		// other way round.
		name:    "agentcraft/wire imports nothing of Shard, protoactor, bbolt or viper",
		pkgs:    []string{"agentcraft/wire"},
		notLink: []string{"...", "github.com/asynkron/protoactor-go/...", "go.etcd.io/bbolt/...", "github.com/spf13/viper/..."},
		except:  []string{"agentcraft/wire"},
	}, {
		// The AgentCraft v1 endpoint is a translator: a client of the
		// daemon's wire protocol serving the dialect, so that it holds no
		// authority of its own and could run outside shardd.
		name:    "agentcraft/server links no daemon code",
		pkgs:    []string{"agentcraft/server"},
		notLink: daemonCode,
	}, {
		// The sim lead's goal grammar is pure text to plan: the team
		// coordinator that will use it depends on it, not the other way
		// round, and it can be fuzzed alone.
		name:    "team/plan imports nothing of Shard",
		pkgs:    []string{"team/plan"},
		notLink: []string{"...", "github.com/asynkron/protoactor-go/...", "go.etcd.io/bbolt/...", "github.com/spf13/viper/..."},
		except:  []string{"team/plan"},
	}, {
		// A team's attachment to its lead is a client of the wire
		// protocol like shardctl: the coordinator that uses it forwards
		// its events into an actor, it holds no actor state itself.
		name:    "team/attend links no daemon code",
		pkgs:    []string{"team/attend"},
		notLink: daemonCode,
	}, {
		// The dashboard and the enrollment page are files; the gateway
		// serves one, internal/daemon mounts the other.
		name:    "web imports nothing of Shard",
		pkgs:    []string{"web/..."},
		notLink: []string{"..."},
		except:  []string{"web/..."},
	}, {
		// The jobs coordinator, the gateway and the composition root use
		// actors/, never the other way round: the registry forwards
		// subagent.* to a jobs PID it is handed, and the messages it shares
		// with jobs are its own.
		name:    "actors/ import neither gateway, jobs nor internal/daemon",
		pkgs:    []string{"actors/..."},
		notLink: []string{"jobs/...", "gateway/...", "internal/daemon/..."},
	}, {
		// Actors see a command line and an environment, never the kind of
		// runtime nor its adapter.
		name:    "actors/ know no runtime kind",
		pkgs:    []string{"actors/..."},
		notLink: []string{"runtime/adapter/...", "config/..."},
	}, {
		// A job runs children on any runtime profile by name; nothing
		// under jobs/ knows the kinds of runtime, their config or the
		// reference runtime.
		name:    "jobs/ know no runtime kind",
		pkgs:    []string{"jobs/..."},
		notLink: []string{"config/...", "runtime/refagent/..."},
	}, {
		// The gateway sees principals, sessions and tokens through
		// gateway.Credentials, which the daemon implements over the store.
		// The actor packages it forwards commands to reach the store
		// themselves.
		name:    "gateway reaches no store but through the actors it forwards to",
		pkgs:    []string{"gateway/..."},
		notLink: []string{"store/...", "go.etcd.io/bbolt/..."},
		via:     []string{"actors/registry", "actors/agent"},
	}, {
		// shardctl is a protocol client. jobs/view (pure projections of
		// job records) is the one package under jobs/ it uses, for
		// --offline. Two daemon packages are allowed on purpose, for what
		// it does while the daemon is down: store (and so bbolt), which
		// --offline opens read-only and doctor checks; config, which
		// doctor loads exactly as shardd does.
		name: "shardctl links no actor, gateway, jobs, supervisor, reference runtime or daemon code",
		pkgs: []string{"cmd/shardctl/..."},
		notLink: []string{"actors/...", "gateway/...", "jobs/...", "supervisor/...", "runtime/refagent/...",
			"internal/daemon/...", "github.com/asynkron/protoactor-go/..."},
		except: []string{"jobs/view"},
	}, {
		// The reference runtime is the child process of every agent: it
		// speaks the per-agent protocol on its stdin and stdout and learns
		// the rest from its command line and environment.
		name: "the reference runtime links no daemon code",
		pkgs: []string{"runtime/refagent/...", "runtime/tools/...", "runtime/provider/...", "runtime/images/...", "runtime/skills/...",
			"runtime/daemontool/..."},
		notLink: daemonCode,
	}, {
		// Shard's MCP server is a client of the daemon acting as one
		// agent, like the runtime's subagent and team tools: the daemon
		// enforces leases, limits and privacy, so the server holds no
		// authority and links none of the daemon.
		name:    "Shard's MCP server links no daemon code",
		pkgs:    []string{"runtime/shardmcp/..."},
		notLink: daemonCode,
	}, {
		// The MCP SDK is the reference runtime's client of MCP servers
		// and Shard's own MCP server; nothing else speaks MCP (shardd
		// runs the server through shardmcp.ServeStdio). internal/daemon is
		// listed for its tests, which play an MCP server whose tools
		// change; its own code only carries the servers' config.
		name:     "only the reference runtime and Shard's MCP server import the MCP SDK",
		imported: []string{"github.com/modelcontextprotocol/go-sdk/..."},
		onlyBy:   []string{"runtime/refagent", "runtime/shardmcp", "internal/daemon"},
	}, {
		// The adapter host runs a third-party agent as a runtime, in the
		// runtime's place.
		name:    "the adapter host links no daemon code",
		pkgs:    []string{"runtime/adapter/..."},
		notLink: daemonCode,
	}, {
		// The store alone knows bbolt: it copies bytes out before a
		// transaction ends, and everyone else gets domain methods.
		name:     "only store imports bbolt",
		imported: []string{"go.etcd.io/bbolt/..."},
		onlyBy:   []string{"store"},
	}, {
		// Components receive their part of the configuration, never
		// viper; shardctl reaches it only through config (doctor).
		name:     "only config imports viper",
		imported: []string{"github.com/spf13/viper/..."},
		onlyBy:   []string{"config"},
	}, {
		// NATS (the embedded server and the JetStream client) is the
		// cluster's engine, and the cluster packages are its only users:
		// the rest of the daemon reaches replicated records and other
		// nodes through them, and a single shardd links none of it.
		name:     "only cluster/... imports NATS",
		imported: []string{"github.com/nats-io/..."},
		onlyBy:   []string{"cluster/..."},
	}}
}

// graph is what `go list -deps -test` says about the module: the
// packages as they ship (links) and every package, test variants
// included, with its direct imports (importers).
type graph struct {
	links     map[string][]string // package → its imports, tests left out
	importers map[string][]string // package or test package → its imports
	// owner is the package whose code a package is: x for "x", "x
	// [x.test]", "x [y.test]", "x_test" and "x.test".
	owner map[string]string
}

// listed is the part of `go list -json` the rules read.
type listed struct {
	ImportPath string
	ForTest    string
	Imports    []string
}

// load lists the module once. A missing go tool fails the test: go test
// always puts its own on PATH.
func load(t *testing.T) graph {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool not found: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-test", "-json=ImportPath,ForTest,Imports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	g, err := parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.links) == 0 {
		t.Fatal("go list listed no package")
	}
	return g
}

// parse reads the stream of JSON objects `go list -json` writes.
func parse(out []byte) (graph, error) {
	g := graph{links: map[string][]string{}, importers: map[string][]string{}, owner: map[string]string{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return g, nil
		} else if err != nil {
			return graph{}, err
		}
		imports := make([]string, len(p.Imports))
		for i, imp := range p.Imports {
			imports[i] = plain(imp)
		}
		g.importers[p.ImportPath] = imports
		path := plain(p.ImportPath)
		switch {
		case p.ForTest != "" && path == p.ForTest+"_test": // x's external tests
			g.owner[p.ImportPath] = p.ForTest
		case p.ForTest == "" && strings.HasSuffix(path, ".test"): // x's test main
			g.owner[p.ImportPath] = strings.TrimSuffix(path, ".test")
		default: // x, x with its tests, or x built again for another package's tests
			g.owner[p.ImportPath] = path
		}
		if p.ImportPath == path && p.ForTest == "" && !strings.HasSuffix(path, ".test") {
			g.links[path] = imports
		}
	}
}

// plain is an import path without the " [x.test]" of a package built
// again for a test.
func plain(path string) string {
	if i := strings.Index(path, " ["); i >= 0 {
		return path[:i]
	}
	return path
}

// matches reports whether package path matches one of patterns.
func matches(path string, patterns []string) bool {
	for _, p := range patterns {
		if p == "..." {
			p = module + "/..."
		} else if first, _, _ := strings.Cut(p, "/"); !strings.Contains(first, ".") {
			p = module + "/" + p
		}
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if path == base || strings.HasPrefix(path, base+"/") {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

// short is path with the module's prefix cut.
func short(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
}

// check returns what breaks r in g, one line per break: the package, what
// it must not link or import, and the chain of imports between them.
func check(r rule, g graph) []string {
	var broken []string
	if (len(r.pkgs) > 0) == (len(r.imported) > 0) || len(r.pkgs) > 0 && len(r.notLink) == 0 || len(r.imported) > 0 && len(r.onlyBy) == 0 {
		broken = append(broken, "a rule is pkgs with notLink, or imported with onlyBy")
	}
	all := sortedKeys(g.importers)
	for _, patterns := range [][]string{r.pkgs, r.notLink, r.except, r.via, r.imported, r.onlyBy} {
		for _, p := range patterns {
			if !slices.ContainsFunc(all, func(path string) bool { return matches(plain(path), []string{p}) }) {
				broken = append(broken, "no package matches "+p+", so the rule would hold by default")
			}
		}
	}
	for _, pkg := range sortedKeys(g.links) {
		if !matches(pkg, r.pkgs) {
			continue
		}
		for _, chain := range forbiddenChains(pkg, r, g) {
			broken = append(broken, short(pkg)+" links "+short(chain[len(chain)-1])+": "+joinShort(chain))
		}
	}
	if len(r.imported) > 0 {
		for _, pkg := range all {
			owner := g.owner[pkg]
			if !strings.HasPrefix(owner, module+"/") || matches(owner, r.onlyBy) {
				continue
			}
			for _, imp := range g.importers[pkg] {
				if matches(imp, r.imported) {
					broken = append(broken, short(plain(pkg))+" imports "+imp)
				}
			}
		}
	}
	return broken
}

// forbiddenChains walks the imports of pkg breadth first, not into the
// packages r lets it reach through (via), and returns the shortest chain
// to each package r forbids that it reaches first on its path.
func forbiddenChains(pkg string, r rule, g graph) [][]string {
	from := map[string]string{pkg: ""}
	queue := []string{pkg}
	var chains [][]string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p != pkg && matches(p, r.notLink) && !matches(p, r.except) {
			var chain []string
			for q := p; q != ""; q = from[q] {
				chain = append(chain, q)
			}
			slices.Reverse(chain)
			chains = append(chains, chain)
			continue
		}
		if p != pkg && matches(p, r.via) {
			continue
		}
		for _, imp := range g.links[p] {
			if _, seen := from[imp]; !seen {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return chains
}

func joinShort(chain []string) string {
	s := make([]string, len(chain))
	for i, p := range chain {
		s[i] = short(p)
	}
	return strings.Join(s, " -> ")
}

func sortedKeys(m map[string][]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// TestRules holds the module to the table.
func TestRules(t *testing.T) {
	t.Parallel()
	g := load(t)
	for _, r := range rules() {
		for _, b := range check(r, g) {
			t.Errorf("rule %q: %s", r.name, b)
		}
	}
}

// TestCheck: check finds what breaks each kind of rule, names the chain,
// and lets via and except through.
func TestCheck(t *testing.T) {
	t.Parallel()
	m := func(p string) string { return module + "/" + p }
	const bolt = "go.etcd.io/bbolt"
	list := func(ps ...listed) graph {
		var b bytes.Buffer
		for _, p := range ps {
			if err := json.NewEncoder(&b).Encode(p); err != nil {
				t.Fatal(err)
			}
		}
		g, err := parse(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := list(
		listed{ImportPath: m("cli"), Imports: []string{m("util"), m("jobs/view")}},
		listed{ImportPath: m("util"), Imports: []string{m("store")}},
		listed{ImportPath: m("store"), Imports: []string{bolt}},
		listed{ImportPath: m("jobs/view"), Imports: []string{m("jobs")}},
		listed{ImportPath: m("jobs")},
		listed{ImportPath: m("gw"), Imports: []string{m("actor")}},
		listed{ImportPath: m("actor"), Imports: []string{m("store")}},
		listed{ImportPath: bolt},
		listed{ImportPath: m("gw") + " [" + m("gw.test") + "]", ForTest: m("gw"), Imports: []string{bolt, m("actor") + " [" + m("gw.test") + "]"}},
		listed{ImportPath: m("store_test") + " [" + m("store.test") + "]", ForTest: m("store"), Imports: []string{bolt}},
		listed{ImportPath: m("store.test"), Imports: []string{m("store_test") + " [" + m("store.test") + "]"}},
		listed{ImportPath: m("store") + " [" + m("gw.test") + "]", ForTest: m("gw"), Imports: []string{bolt}},
	)
	for _, tc := range []struct {
		name string
		r    rule
		want []string
	}{
		{"a chain", rule{pkgs: []string{"cli"}, notLink: []string{"store/..."}},
			[]string{"cli links store: cli -> util -> store"}},
		{"the first forbidden package on a path only", rule{pkgs: []string{"cli"}, notLink: []string{"util", bolt + "/..."}},
			[]string{"cli links util: cli -> util"}},
		{"except", rule{pkgs: []string{"cli"}, notLink: []string{"jobs/..."}, except: []string{"jobs/view"}},
			[]string{"cli links jobs: cli -> jobs/view -> jobs"}},
		{"via", rule{pkgs: []string{"gw"}, notLink: []string{"store"}, via: []string{"actor"}}, nil},
		{"not via", rule{pkgs: []string{"gw"}, notLink: []string{"store"}},
			[]string{"gw links store: gw -> actor -> store"}},
		{"an importer's tests", rule{imported: []string{bolt + "/..."}, onlyBy: []string{"store"}},
			[]string{"gw imports " + bolt}},
		{"a pattern that matches nothing", rule{pkgs: []string{"nothing/..."}, notLink: []string{"store"}},
			[]string{"no package matches nothing/..., so the rule would hold by default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := check(tc.r, g); !slices.Equal(got, tc.want) {
				t.Errorf("check = %q, want %q", got, tc.want)
			}
		})
	}
}
