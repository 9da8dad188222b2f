package provider

import (
	"strconv"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// descriptor is the catalog entry of a provider's configured model. Its ID is
// "<provider>/<model>", unique across providers.
func descriptor(name, model string, window int) protocol.ModelDescriptor {
	if window == 0 {
		window = knownContextWindow(name, model)
	}
	return protocol.ModelDescriptor{
		ID:            name + "/" + model,
		Provider:      name,
		Model:         model,
		ContextWindow: window,
	}
}

// Describe is the catalog entry of model on the provider configured under
// name, of kind NameOpenAI or NameAnthropic (a daemon may configure several
// of one kind): id "<name>/<model>", and the model's context window when it
// is a well-known one.
func Describe(name, kind, model string) protocol.ModelDescriptor {
	return protocol.ModelDescriptor{ID: name + "/" + model, Provider: name, Model: model, ContextWindow: knownContextWindow(kind, model)}
}

// knownContextWindow is the context window of well-known models, 0 when the
// model is not known (a local server's model, a new release).
func knownContextWindow(name, model string) int {
	m := strings.ToLower(model)
	switch name {
	case NameAnthropic:
		if strings.HasPrefix(m, "claude-") {
			return 200_000
		}
	case NameOpenAI:
		switch {
		case strings.HasPrefix(m, "gpt-4.1"):
			return 1_047_576
		case strings.HasPrefix(m, "gpt-5"):
			return 400_000
		case strings.HasPrefix(m, "gpt-4o"), strings.HasPrefix(m, "gpt-4-turbo"):
			return 128_000
		case isOpenAIReasoningModel(m) && !strings.HasPrefix(m, "gpt-oss"):
			return 200_000
		}
	}
	return 0
}

// Reasoning level ids shared by both providers.
const (
	levelOff     = "off"
	levelMinimal = "minimal"
	levelLow     = "low"
	levelMedium  = "medium"
	levelHigh    = "high"
)

// openaiLevels is the reasoning_effort catalog of OpenAI-style reasoning
// models (o-series, gpt-5, gpt-oss); other models have none. The level id is
// sent verbatim as reasoning_effort.
func openaiLevels(model string) []Level {
	m := strings.ToLower(model)
	if !isOpenAIReasoningModel(m) {
		return nil
	}
	var levels []Level
	if strings.HasPrefix(m, "gpt-5") {
		levels = append(levels, Level{ID: levelMinimal, Label: "Minimal", Description: "Very little reasoning; fastest answers."})
	}
	return append(levels,
		Level{ID: levelLow, Label: "Low", Description: "Light reasoning; faster and cheaper."},
		Level{ID: levelMedium, Label: "Medium", Description: "Balanced reasoning (the service default)."},
		Level{ID: levelHigh, Label: "High", Description: "Thorough reasoning; slower and more tokens."},
	)
}

// isOpenAIReasoningModel reports whether the lower-cased model id names a
// model that accepts reasoning_effort.
func isOpenAIReasoningModel(m string) bool {
	if strings.HasPrefix(m, "gpt-5") {
		return !strings.Contains(m, "-chat")
	}
	if strings.HasPrefix(m, "gpt-oss") {
		return true
	}
	// o1, o3, o4-mini, …: "o" followed by a digit.
	return len(m) >= 2 && m[0] == 'o' && m[1] >= '1' && m[1] <= '9'
}

// thinkingMode is how an Anthropic model is asked to think.
type thinkingMode int

const (
	thinkingNone     thinkingMode = iota // the model cannot think
	thinkingBudget                       // thinking {type: enabled, budget_tokens}
	thinkingAdaptive                     // thinking {type: adaptive} + output_config.effort
)

// Thinking budgets of the budget-mode levels. With the answer allowance added
// (anthropicAnswerTokens) the largest stays under every thinking model's
// output limit.
const (
	budgetLow    = 4_096
	budgetMedium = 10_240
	budgetHigh   = 20_480
)

// Default Anthropic max_tokens.
const (
	anthropicAnswerTokens   = 16_384 // answer allowance on top of a thinking budget, and the default
	anthropicAdaptiveTokens = 32_000 // adaptive thinking shares max_tokens with the answer
	claude3OutputTokens     = 4_096  // Claude 3 (Haiku, Sonnet, Opus) output limit
	claude35OutputTokens    = 8_192  // Claude 3.5 output limit
)

// claudeVersion parses the major and minor version out of a Claude model id,
// whichever order family and version come in ("claude-3-7-sonnet-20250219",
// "claude-sonnet-4-5"). ok is false when the id has no version number.
func claudeVersion(model string) (major, minor int, ok bool) {
	parts := strings.Split(strings.ToLower(model), "-")
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || len(p) > 2 {
			continue
		}
		major = n
		if i+1 < len(parts) && len(parts[i+1]) <= 2 {
			if m, err := strconv.Atoi(parts[i+1]); err == nil {
				minor = m
			}
		}
		return major, minor, true
	}
	return 0, 0, false
}

// anthropicThinking says how model thinks. Claude 3 models other than 3.7
// cannot; Claude 3.7 and 4.0–4.5 take a token budget; Claude 4.6 and later
// (and the Mythos line) think adaptively with an effort. Models that are not
// Claude (an Anthropic-compatible server) are assumed to take a budget.
func anthropicThinking(model string) thinkingMode {
	m := strings.ToLower(model)
	if !strings.HasPrefix(m, "claude") {
		return thinkingBudget
	}
	if strings.Contains(m, "mythos") {
		return thinkingAdaptive
	}
	major, minor, ok := claudeVersion(m)
	switch {
	case !ok:
		return thinkingBudget
	case major < 3, major == 3 && minor != 7:
		return thinkingNone
	case major == 3, major == 4 && minor < 6:
		return thinkingBudget
	}
	return thinkingAdaptive
}

// anthropicLevels is the thinking catalog of model, nil when it cannot think.
func anthropicLevels(model string) []Level {
	switch anthropicThinking(model) {
	case thinkingBudget:
		return []Level{
			{ID: levelOff, Label: "Off", Description: "No extended thinking (the default)."},
			{ID: levelLow, Label: "Low", Description: "Think with a budget of about 4k tokens."},
			{ID: levelMedium, Label: "Medium", Description: "Think with a budget of about 10k tokens."},
			{ID: levelHigh, Label: "High", Description: "Think with a budget of about 20k tokens."},
		}
	case thinkingAdaptive:
		return []Level{
			{ID: levelOff, Label: "Off", Description: "No thinking."},
			{ID: levelLow, Label: "Low", Description: "Adaptive thinking, low effort."},
			{ID: levelMedium, Label: "Medium", Description: "Adaptive thinking, medium effort."},
			{ID: levelHigh, Label: "High", Description: "Adaptive thinking, high effort."},
		}
	}
	return nil
}

// anthropicDefaultMaxTokens is max_tokens for a call without thinking.
func anthropicDefaultMaxTokens(model string) int {
	m := strings.ToLower(model)
	if strings.HasPrefix(m, "claude") {
		if major, minor, ok := claudeVersion(m); ok && major == 3 {
			switch minor {
			case 5:
				return claude35OutputTokens
			case 7:
				return anthropicAnswerTokens
			}
			return claude3OutputTokens
		}
	}
	return anthropicAnswerTokens
}
