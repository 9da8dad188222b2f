package protocol

import "testing"

// jobs.prune decodes with its fields, and a negative age is refused naming
// the field.
func TestJobsPruneDecodeAndValidate(t *testing.T) {
	cmd, _, err := DecodeCommand([]byte(`{"id":"p","type":"jobs.prune","older_than_ms":3600000,"dry_run":true}`))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := cmd.(*JobsPrune)
	if !ok || m.OlderThanMs != 3600000 || !m.DryRun {
		t.Fatalf("decoded %#v", cmd)
	}
	if CommandScope(TypeJobsPrune) != ScopeOrchestrator {
		t.Fatalf("jobs.prune scope = %v; want orchestrator", CommandScope(TypeJobsPrune))
	}
	_, _, err = DecodeCommand([]byte(`{"id":"p","type":"jobs.prune","older_than_ms":-1}`))
	if CodeOf(err) != CodeInvalidRequest {
		t.Fatalf("negative older_than_ms: %v; want INVALID_REQUEST", err)
	}
}
