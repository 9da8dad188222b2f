package acp

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// A scripted ACP agent played by this test binary (TestMain runs it when
// ScriptedAgentEnv is set), built on the SDK's agent side. It advertises
// session/load, resume and close; with ScriptedConfigEnv=1 it has modes
// and models both ways (the older modes/models and config options of
// category mode, model and thought_level). Each prompt streams "ok #n",
// sends a usage_update (used 1000·n tokens of 200000, cumulative cost
// 0.25·n USD) and answers end_turn with usage 10/5; a prompt "think hard"
// makes it switch its thought level to high on its own, "use small" its
// model to m-small (config_option_update). Every method it gets is appended to the file
// ScriptedLogEnv names, one line each ("session/set_config_option
// thought=high"). With ScriptedIgnoreEOFEnv=1 it keeps running after its
// stdin ends.
const (
	ScriptedAgentEnv     = "SHARD_TEST_ACP_AGENT"
	ScriptedLogEnv       = "SHARD_TEST_ACP_LOG"
	ScriptedConfigEnv    = "SHARD_TEST_ACP_CONFIG"
	ScriptedIgnoreEOFEnv = "SHARD_TEST_ACP_IGNORE_EOF"
)

type scripted struct {
	conn   *sdk.AgentSideConnection
	config bool

	mu      sync.Mutex
	prompts int
	values  map[string]string // config option id → current value
}

// runScriptedAgent serves one ACP connection on stdin/stdout.
func runScriptedAgent() {
	a := &scripted{config: os.Getenv(ScriptedConfigEnv) == "1",
		values: map[string]string{"mode": "ask", "model": "m-small", "thought": "low"}}
	a.conn = sdk.NewAgentSideConnection(a, os.Stdout, os.Stdin)
	<-a.conn.Done()
	if os.Getenv(ScriptedIgnoreEOFEnv) == "1" {
		select {} // until a signal ends it
	}
}

func (a *scripted) log(format string, args ...any) {
	path := os.Getenv(ScriptedLogEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", args...)
}

func ptr[T any](v T) *T { return &v }

func choice(value, name string) sdk.SessionConfigSelectOption {
	return sdk.SessionConfigSelectOption{Value: sdk.SessionConfigValueId(value), Name: name}
}

// session is what a session/new, load or resume answer carries.
func (a *scripted) session() (*sdk.SessionModeState, *sdk.SessionModelState, []sdk.SessionConfigOption) {
	if !a.config {
		return nil, nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	modes := &sdk.SessionModeState{CurrentModeId: sdk.SessionModeId(a.values["mode"]),
		AvailableModes: []sdk.SessionMode{{Id: "ask", Name: "Ask"}, {Id: "code", Name: "Code"}}}
	models := &sdk.SessionModelState{CurrentModelId: sdk.ModelId(a.values["model"]),
		AvailableModels: []sdk.ModelInfo{{ModelId: "m-small", Name: "Small"}, {ModelId: "m-large", Name: "Large"}}}
	return modes, models, a.configLocked()
}

func (a *scripted) configLocked() []sdk.SessionConfigOption {
	sel := func(id, name string, cat sdk.SessionConfigOptionCategory, opts ...sdk.SessionConfigSelectOption) sdk.SessionConfigOption {
		ungrouped := sdk.SessionConfigSelectOptionsUngrouped(opts)
		return sdk.SessionConfigOption{Select: &sdk.SessionConfigOptionSelect{Id: sdk.SessionConfigId(id), Name: name, Type: "select",
			Category: ptr(cat), CurrentValue: sdk.SessionConfigValueId(a.values[id]), Options: sdk.SessionConfigSelectOptions{Ungrouped: &ungrouped}}}
	}
	thought := choice("high", "High")
	thought.Description = ptr("Think longer")
	return []sdk.SessionConfigOption{
		sel("mode", "Mode", sdk.SessionConfigOptionCategoryMode, choice("ask", "Ask"), choice("code", "Code")),
		sel("model", "Model", sdk.SessionConfigOptionCategoryModel, choice("m-small", "Small"), choice("m-large", "Large")),
		sel("thought", "Thinking", sdk.SessionConfigOptionCategoryThoughtLevel, choice("low", "Low"), thought),
		{Boolean: &sdk.SessionConfigOptionBoolean{Id: "beta", Name: "Beta", Type: "boolean"}},
	}
}

func (a *scripted) Initialize(context.Context, sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	a.log("initialize")
	return sdk.InitializeResponse{ProtocolVersion: sdk.ProtocolVersionNumber, AgentCapabilities: sdk.AgentCapabilities{
		LoadSession:         true,
		SessionCapabilities: sdk.SessionCapabilities{Resume: &sdk.SessionResumeCapabilities{}, Close: &sdk.SessionCloseCapabilities{}},
	}}, nil
}

func (a *scripted) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}

func (a *scripted) NewSession(_ context.Context, req sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	a.log("session/new mcpServers=%d", len(req.McpServers))
	modes, models, opts := a.session()
	return sdk.NewSessionResponse{SessionId: "scripted-1", Modes: modes, Models: models, ConfigOptions: opts}, nil
}

func (a *scripted) LoadSession(ctx context.Context, req sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	a.log("session/load %s", req.SessionId)
	_ = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: req.SessionId, Update: sdk.UpdateUserMessageText("replayed")})
	modes, models, opts := a.session()
	return sdk.LoadSessionResponse{Modes: modes, Models: models, ConfigOptions: opts}, nil
}

func (a *scripted) ResumeSession(_ context.Context, req sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	a.log("session/resume %s mcpServers=%d", req.SessionId, len(req.McpServers))
	modes, models, opts := a.session()
	return sdk.ResumeSessionResponse{Modes: modes, Models: models, ConfigOptions: opts}, nil
}

func (a *scripted) CloseSession(_ context.Context, req sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	a.log("session/close %s", req.SessionId)
	return sdk.CloseSessionResponse{}, nil
}

func (a *scripted) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	a.log("session/list")
	return sdk.ListSessionsResponse{}, nil
}

func (a *scripted) Cancel(context.Context, sdk.CancelNotification) error {
	a.log("session/cancel")
	return nil
}

func (a *scripted) SetSessionMode(_ context.Context, req sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	a.log("session/set_mode %s", req.ModeId)
	a.mu.Lock()
	a.values["mode"] = string(req.ModeId)
	a.mu.Unlock()
	return sdk.SetSessionModeResponse{}, nil
}

func (a *scripted) SetSessionConfigOption(_ context.Context, req sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	v := req.ValueId
	if v == nil {
		return sdk.SetSessionConfigOptionResponse{}, sdk.NewInvalidParams(map[string]string{"value": "want a value id"})
	}
	a.log("session/set_config_option %s=%s", v.ConfigId, v.Value)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.values[string(v.ConfigId)]; !ok {
		return sdk.SetSessionConfigOptionResponse{}, sdk.NewInvalidParams(map[string]string{"configId": "unknown"})
	}
	a.values[string(v.ConfigId)] = string(v.Value)
	return sdk.SetSessionConfigOptionResponse{ConfigOptions: a.configLocked()}, nil
}

func (a *scripted) Prompt(ctx context.Context, req sdk.PromptRequest) (sdk.PromptResponse, error) {
	var text []string
	for _, b := range req.Prompt {
		if b.Text != nil {
			text = append(text, b.Text.Text)
		}
	}
	a.mu.Lock()
	a.prompts++
	n := a.prompts
	said := strings.Join(text, " ")
	switch said {
	case "think hard":
		a.values["thought"] = "high"
	case "use small":
		a.values["model"] = "m-small"
	}
	opts := a.configLocked()
	a.mu.Unlock()
	a.log("session/prompt")
	send := func(u sdk.SessionUpdate) {
		_ = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: req.SessionId, Update: u})
	}
	if said == "think hard" || said == "use small" {
		send(sdk.SessionUpdate{ConfigOptionUpdate: &sdk.SessionConfigOptionUpdate{SessionUpdate: "config_option_update", ConfigOptions: opts}})
	}
	send(sdk.UpdateAgentMessageText(fmt.Sprintf("ok #%d", n)))
	send(sdk.SessionUpdate{UsageUpdate: &sdk.SessionUsageUpdate{SessionUpdate: "usage_update", Used: 1000 * n, Size: 200000,
		Cost: &sdk.Cost{Amount: 0.25 * float64(n), Currency: "USD"}}})
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn, Usage: &sdk.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}}, nil
}
