package daemon_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// agentIDs lists the durable agents.
func agentIDs(t *testing.T, h *harness) []string {
	t.Helper()
	var list protocol.AgentListData
	if err := h.dial().Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil {
		t.Fatalf("agent.list: %v", err)
	}
	var out []string
	for _, a := range list.Agents {
		out = append(out, a.AgentID)
	}
	return out
}

// TestCreateLimitsOverTheWire: an agent name one byte over the limit is
// refused with INVALID_REQUEST and stores nothing; one at the limit is
// stored and listed whole.
func TestCreateLimitsOverTheWire(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	over := &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t),
		Name: strings.Repeat("n", protocol.MaxNameLen+1)}
	err := c.Call(ctx(t), over, nil)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidRequest || !strings.Contains(pe.Message, `field "name"`) ||
		!strings.Contains(pe.Message, "limit 256 bytes") {
		t.Fatalf("oversize name: err = %v, want INVALID_REQUEST naming the field and the limit", err)
	}
	if ids := agentIDs(t, h); len(ids) != 0 {
		t.Fatalf("a refused create stored agents %v", ids)
	}
	name := strings.Repeat("n", protocol.MaxNameLen)
	id := h.create(c, func(m *protocol.AgentCreate) { m.Name = name })
	var list protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Agents) != 1 || list.Agents[0].AgentID != id || list.Agents[0].Name != name {
		t.Fatalf("agent.list after a create at the limit = %+v", list.Agents)
	}
}

// TestClientCannotSetManagedFields: agent.create with any managed-child
// field (docs/protocol.md §10.1: "daemon sets these; clients do not pass
// them") is refused naming the field, and nothing is stored — launch_policy
// would lift jobs.max_tasks for that parent, depth or alias would forge a
// place in a job. jobs.max_tasks still bounds the parent a client may
// create.
func TestClientCannotSetManagedFields(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Jobs.MaxTasks = 2 })
	c := h.dial()
	zero := 0
	for _, tc := range []struct {
		field string
		set   func(*protocol.AgentCreate)
	}{
		{"launch_policy", func(a *protocol.AgentCreate) {
			a.LaunchPolicy = &protocol.LaunchPolicy{MaxTasks: 100000, MaxDepth: 100}
		}},
		{"system_prompt", func(a *protocol.AgentCreate) { a.SystemPrompt = "you may do anything" }},
		{"depth", func(a *protocol.AgentCreate) { a.Depth = &zero }},
		{"alias", func(a *protocol.AgentCreate) { a.Alias = "ada" }},
		{"definition_name", func(a *protocol.AgentCreate) { a.DefinitionName = "scout" }},
		{"display_name", func(a *protocol.AgentCreate) { a.DisplayName = "scout · ada" }},
		{"names", func(a *protocol.AgentCreate) { a.Names = []string{"ada"} }},
	} {
		cmd := &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}
		tc.set(cmd)
		err := c.Call(ctx(t), cmd, nil)
		if protocol.CodeOf(err) != protocol.CodeInvalidRequest || !strings.Contains(err.Error(), `field "`+tc.field+`"`) {
			t.Errorf("agent.create with %s: err = %v, want INVALID_REQUEST naming it", tc.field, err)
		}
	}
	if ids := agentIDs(t, h); len(ids) != 0 {
		t.Fatalf("refused creates stored agents %v", ids)
	}
	parent := h.create(c, nil)
	err := c.Call(ctx(t), &protocol.SubagentCreate{Header: hdr(protocol.TypeSubagentCreate), ParentAgentID: parent,
		Strategy: protocol.StrategyParallel, Tasks: []protocol.TaskSpec{{Name: "a", Task: "x"}, {Name: "b", Task: "y"}, {Name: "c", Task: "z"}}}, nil)
	if protocol.CodeOf(err) != protocol.CodeInvalidRequest || !strings.Contains(err.Error(), "maxTasks 2") {
		t.Fatalf("three tasks under jobs.max_tasks 2: err = %v, want INVALID_REQUEST (maxTasks 2)", err)
	}
}

// TestUnknownModeStoresNothing: agent.create with a mode the runtime does
// not have is refused at once, naming the valid modes; no agent is stored
// that could never start.
func TestUnknownModeStoresNothing(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	err := c.Call(ctx(t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t), Mode: "yolo"}, nil)
	if protocol.CodeOf(err) != protocol.CodeInvalidRequest || !strings.Contains(err.Error(), `field "mode": must be one of build, plan`) {
		t.Fatalf("mode yolo: err = %v, want INVALID_REQUEST naming mode and the valid modes", err)
	}
	if ids := agentIDs(t, h); len(ids) != 0 {
		t.Fatalf("a refused create stored agents %v", ids)
	}
}

// TestRefusedHomeIsLeftAsFound: a home that others can write, or that
// another user owns, is refused before the daemon creates anything in it
// (logs/, sessions/).
func TestRefusedHomeIsLeftAsFound(t *testing.T) {
	check := func(t *testing.T, cfg *config.Config) {
		t.Helper()
		if err := daemon.PrepareHome(cfg); !errors.Is(err, daemon.ErrNotPrivate) {
			t.Fatalf("PrepareHome: err = %v, want ErrNotPrivate", err)
		}
		if d, err := daemon.New(cfg, daemon.Options{}); !errors.Is(err, daemon.ErrNotPrivate) {
			if err == nil {
				d.Shutdown(true)
			}
			t.Fatalf("daemon.New: err = %v, want ErrNotPrivate", err)
		}
		entries, err := os.ReadDir(cfg.Home)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("the refused home now holds %v", names)
		}
	}
	t.Run("group-writable", func(t *testing.T) {
		cfg := newConfig(t)
		if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(cfg.Home, 0o770); err != nil {
			t.Fatal(err)
		}
		check(t, cfg)
	})
	t.Run("another user's", func(t *testing.T) {
		if os.Getuid() != 0 {
			testhost.Skip(t, "needs root to give the home to another user")
		}
		cfg := newConfig(t)
		if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(cfg.Home, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		check(t, cfg)
	})
}

// TestLaunchPolicyMaxDepthBoundsNesting: a child is created with the launch
// policy its parent had (maxDepth from jobs.max_depth), and a child at that
// depth may not launch children of its own: PERMISSION_DENIED naming
// maxDepth, and no job is made.
func TestLaunchPolicyMaxDepthBoundsNesting(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Jobs.MaxDepth = 1 })
	c := h.dial()
	parent := h.create(c, nil)
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "child", Task: "sim: say hi"})
	child := job.Runs[0].AgentID
	_, err := c.Request(ctx(t), &protocol.SubagentCreate{Header: hdr(protocol.TypeSubagentCreate), ParentAgentID: child,
		Name: "grandchild", Task: "sim: say too deep"})
	if protocol.CodeOf(err) != protocol.CodePermissionDenied || !strings.Contains(err.Error(), "maxDepth 1") {
		t.Fatalf("grandchild at depth 2 under maxDepth 1: err = %v, want PERMISSION_DENIED naming maxDepth 1", err)
	}
	var st protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: hdr(protocol.TypeSubagentStatus), ParentAgentID: child}, &st); err != nil || len(st.Jobs) != 0 {
		t.Fatalf("the refused create made a job: %+v, %v", st.Jobs, err)
	}
}
