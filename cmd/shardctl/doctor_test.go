package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// doctorHome is a healthy, stopped Shard home: owner-only, with a database.
func doctorHome(t *testing.T) string {
	t.Helper()
	home := socketDir(t)
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(home, dbName), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	return home
}

// doctor runs shardctl doctor -o json and returns its report.
func doctor(t *testing.T, args ...string) (result, doctorReport, map[string]doctorCheck) {
	t.Helper()
	r := runCtl(t, nil, "", "", append(args, "doctor", "-o", "json")...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor printed %q (stderr %q): %v", r.stdout, r.stderr, err)
	}
	byName := map[string]doctorCheck{}
	for _, c := range rep.Checks {
		byName[c.Name] = c
	}
	return r, rep, byName
}

func TestDoctorHealthyStoppedHome(t *testing.T) {
	home := doctorHome(t)
	r, rep, c := doctor(t, "--home", home)
	if r.code != 0 || !rep.OK {
		t.Fatalf("exit %d report %+v", r.code, rep)
	}
	for name, status := range map[string]string{"home": checkOK, "config": checkOK, "daemon": checkWarn, "database": checkOK, "store": checkOK, "orphans": checkOK} {
		if c[name].Status != status {
			t.Errorf("%s = %+v, want %s", name, c[name], status)
		}
	}
	if !strings.Contains(c["store"].Detail, "checked read-only") {
		t.Errorf("store: %+v", c["store"])
	}
	r = runCtl(t, nil, "", "", "--home", home, "doctor")
	if r.code != 0 || !strings.Contains(r.stdout, "No problems found.") || !strings.HasPrefix(r.stdout, "CHECK") {
		t.Errorf("table: exit %d\n%s", r.code, r.stdout)
	}
}

func TestDoctorFindsProblems(t *testing.T) {
	home := doctorHome(t)
	db := filepath.Join(home, dbName)
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("bogus_key: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A discovery file whose pid is alive but no daemon answers on the
	// socket (a hung daemon).
	sleep := testhost.Tool(t, "sleep")
	hung := exec.Command(sleep, "30")
	if err := hung.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hung.Process.Kill(); _ = hung.Wait() }()
	if err := os.WriteFile(filepath.Join(home, discoveryName), []byte(`{"pid":`+strconv.Itoa(hung.Process.Pid)+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// An agent runtime of this home outside any daemon.
	orphan := exec.Command(sleep, "30")
	orphan.Env = append(os.Environ(), "SHARD_HOME="+home, "SHARD_AGENT_ID=agent-orphan")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = orphan.Process.Kill(); _ = orphan.Wait() }()

	r, rep, c := doctor(t, "--home", home)
	if r.code != exitProblems || rep.OK || r.stderr != "shardctl: doctor found problems\n" {
		t.Fatalf("exit %d stderr %q report %+v", r.code, r.stderr, rep)
	}
	if c["database"].Status != checkFail || !strings.Contains(c["database"].Detail, "mode 0644") || !strings.Contains(c["database"].Detail, "chmod 600") {
		t.Errorf("database: %+v", c["database"])
	}
	if c["config"].Status != checkFail || !strings.Contains(c["config"].Detail, "bogus_key") {
		t.Errorf("config: %+v", c["config"])
	}
	if c["discovery"].Status != checkFail || !strings.Contains(c["discovery"].Detail, "alive but does not answer") {
		t.Errorf("discovery: %+v", c["discovery"])
	}
	if c["orphans"].Status != checkFail || !strings.Contains(c["orphans"].Detail, "pid "+strconv.Itoa(orphan.Process.Pid)+" (agent-orphan)") {
		t.Errorf("orphans: %+v", c["orphans"])
	}

	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, c = doctor(t, "--home", home)
	if c["home"].Status != checkFail || !strings.Contains(c["home"].Detail, "chmod 700") {
		t.Errorf("home: %+v", c["home"])
	}
	_, _, c = doctor(t, "--home", filepath.Join(home, "missing"))
	if c["home"].Status != checkFail || !strings.Contains(c["home"].Detail, "does not exist") {
		t.Errorf("missing home: %+v", c["home"])
	}
}

func TestDoctorAsksTheRunningDaemon(t *testing.T) {
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) {
		switch h.Type {
		case protocol.TypeDaemonStatus:
			st := sampleStatus
			st.PID = os.Getpid()
			c.respond(h, st)
		case protocol.TypeDaemonCheck:
			c.respond(h, protocol.DaemonCheckData{StoreError: "page 7: unreachable unfreed", SchemaVersion: 1})
		}
	})
	home := filepath.Dir(d.path)
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(home, dbName), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.WriteFile(filepath.Join(home, discoveryName), []byte(`{"pid":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _, c := doctor(t, "--home", home)
	if r.code != exitProblems {
		t.Fatalf("exit %d", r.code)
	}
	if c["daemon"].Status != checkOK || !strings.Contains(c["daemon"].Detail, "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("daemon: %+v", c["daemon"])
	}
	if c["socket"].Status != checkFail && c["socket"].Status != checkOK {
		t.Errorf("socket: %+v", c["socket"])
	}
	if c["store"].Status != checkFail || !strings.Contains(c["store"].Detail, "page 7: unreachable unfreed") {
		t.Errorf("store: %+v", c["store"])
	}
	if c["discovery"].Status != checkFail || !strings.Contains(c["discovery"].Detail, "names pid 1") {
		t.Errorf("discovery: %+v", c["discovery"])
	}
}

// TestDoctorWorkspaces: a stopped home whose store holds an active
// workspace with its worktree gone and one stuck retiring, and whose
// worktree root holds a directory where the daemon puts worktrees that no
// record holds: doctor warns about each (exit 0: nothing is lost), and a
// healthy one is ok.
func TestDoctorWorkspaces(t *testing.T) {
	home := doctorHome(t)
	real, err := filepath.EvalSymlinks(home)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(real, "worktrees")
	held := filepath.Join(root, "repo-0000", "workspace-held")
	stray := filepath.Join(root, "repo-0000", "workspace-stray")
	for _, d := range []string{held, stray} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.Open(filepath.Join(home, dbName), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(id string, state protocol.WorkspaceState, path string) store.Workspace {
		return store.Workspace{WorkspaceID: id, Ownership: protocol.OwnershipManaged, RepoRoot: "/repo", CommonDir: "/repo/.git",
			WorktreePath: path, Branch: "shard/" + id, State: state, CreatedAt: 1, UpdatedAt: 1}
	}
	for _, w := range []store.Workspace{
		rec("workspace-held", protocol.WorkspaceStateActive, held),
		rec("workspace-gone", protocol.WorkspaceStateActive, filepath.Join(root, "repo-0000", "workspace-gone")),
		rec("workspace-cut", protocol.WorkspaceStateRetiring, filepath.Join(root, "repo-0000", "workspace-cut")),
	} {
		if err := st.CreateWorkspace(w); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	r, rep, c := doctor(t, "--home", home)
	if r.code != 0 || !rep.OK {
		t.Fatalf("exit %d report %+v", r.code, rep)
	}
	ws := c["workspaces"]
	for _, want := range []string{"missing worktree", "workspace-gone", "stuck mid-operation", "workspace-cut (retiring)", "1 unrecorded", stray + " (not a git worktree)"} {
		if ws.Status != checkWarn || !strings.Contains(ws.Detail, want) {
			t.Errorf("workspaces = %+v, want a warning naming %q", ws, want)
		}
	}
	if strings.Contains(ws.Detail, "workspace-held") {
		t.Errorf("a healthy workspace reported: %+v", ws)
	}

	_, _, c = doctor(t, "--home", doctorHome(t))
	if c["workspaces"].Status != checkOK {
		t.Errorf("workspaces of an empty home = %+v", c["workspaces"])
	}
}

// TestDoctorKeepsToItsNode: a cluster node lists every node's workspaces;
// another node's, whose paths mean nothing here, are not this home's
// problems.
func TestDoctorKeepsToItsNode(t *testing.T) {
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) {
		switch h.Type {
		case protocol.TypeDaemonStatus:
			st := sampleStatus
			st.PID = os.Getpid()
			c.respond(h, st)
		case protocol.TypeDaemonCheck:
			c.respond(h, protocol.DaemonCheckData{SchemaVersion: 1})
		case protocol.TypeClusterStatus:
			c.respond(h, protocol.ClusterStatusData{Enabled: true, Node: "n2"})
		case protocol.TypeWorkspaceList:
			c.respond(h, protocol.WorkspaceListData{Workspaces: []protocol.WorkspaceInfo{
				{WorkspaceID: "workspace-1", Node: "n1", State: protocol.WorkspaceStateActive, Cwd: "/on/n1/only"},
				{WorkspaceID: "workspace-2", Node: "n2", State: protocol.WorkspaceStateActive, Cwd: "/gone/from/n2"},
			}})
		}
	})
	home := filepath.Dir(d.path)
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, c := doctor(t, "--home", home)
	w := c["workspaces"]
	if w.Status != checkWarn || !strings.Contains(w.Detail, "workspace-2") || strings.Contains(w.Detail, "workspace-1") {
		t.Fatalf("workspaces: %+v", w)
	}
}
