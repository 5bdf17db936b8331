package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
)

// TestReasoningFlags checks llama-server's --reasoning (-rea), --reasoning-format and
// --reasoning-budget, and their environment variables.
func TestReasoningFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want chat.Reasoning
	}{
		{nil, nil, chat.ReasoningAuto},
		{[]string{"--reasoning", "off"}, nil, chat.ReasoningOff},
		{[]string{"-rea", "on"}, nil, chat.ReasoningOn},
		{nil, map[string]string{"LLAMA_ARG_REASONING": "off"}, chat.ReasoningOff},
		{[]string{"--reasoning", "auto"}, map[string]string{"LLAMA_ARG_REASONING": "off"}, chat.ReasoningAuto},
	} {
		cfg, err := parseServe(t, tt.env, tt.args...).serverConfig()
		if err != nil || cfg.Reasoning != tt.want {
			t.Errorf("%q %v: reasoning %v (%v), want %v", tt.args, tt.env, cfg.Reasoning, err, tt.want)
		}
	}
	cfg, err := parseServe(t, map[string]string{"LLAMA_ARG_THINK": "none", "LLAMA_ARG_THINK_BUDGET": "0", "LLAMA_ARG_THINK_BUDGET_MESSAGE": "Enough."}).serverConfig()
	if err != nil || cfg.ReasoningFormat != toolcall.ReasoningNone || cfg.ReasoningBudget == nil || *cfg.ReasoningBudget != 0 || cfg.ReasoningBudgetMessage != "Enough." {
		t.Errorf("from the environment: format %v, budget %v %q (%v)", cfg.ReasoningFormat, cfg.ReasoningBudget, cfg.ReasoningBudgetMessage, err)
	}
	if cfg, err := parseServe(t, nil, "--reasoning-budget", "256").serverConfig(); err != nil || cfg.ReasoningBudget == nil || *cfg.ReasoningBudget != 256 {
		t.Errorf("--reasoning-budget 256: %v (%v)", cfg.ReasoningBudget, err)
	}
	if cfg, err := parseServe(t, nil).serverConfig(); err != nil || cfg.ReasoningBudget != nil {
		t.Errorf("default budget %v (%v), want unbounded", cfg.ReasoningBudget, err)
	}
	if _, err := parseServe(t, nil, "--reasoning-budget", "-2").serverConfig(); err == nil || !strings.Contains(err.Error(), "--reasoning-budget") {
		t.Errorf("--reasoning-budget -2: %v", err)
	}
	f, err := parseServeFlags([]string{"--reasoning", "maybe"}, io.Discard, func(string) string { return "" })
	if err == nil {
		_, err = f.serverConfig()
	}
	if err == nil || !strings.Contains(err.Error(), `--reasoning: unknown value "maybe"`) {
		t.Errorf("--reasoning maybe: %v", err)
	}
}

// TestPrefillAssistantFlags checks --prefill-assistant (the default), --no-prefill-assistant and
// LLAMA_ARG_PREFILL_ASSISTANT.
func TestPrefillAssistantFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want bool // NoPrefillAssistant
	}{
		{nil, nil, false},
		{[]string{"--no-prefill-assistant"}, nil, true},
		{[]string{"--no-prefill-assistant", "--prefill-assistant"}, nil, false},
		{nil, map[string]string{"LLAMA_ARG_PREFILL_ASSISTANT": "false"}, true},
	} {
		cfg, err := parseServe(t, tt.env, tt.args...).serverConfig()
		if err != nil || cfg.NoPrefillAssistant != tt.want {
			t.Errorf("%q %v: NoPrefillAssistant %v (%v), want %v", tt.args, tt.env, cfg.NoPrefillAssistant, err, tt.want)
		}
	}
}

// TestChatTemplateKwargsFlag checks --chat-template-kwargs and LLAMA_CHAT_TEMPLATE_KWARGS.
func TestChatTemplateKwargsFlag(t *testing.T) {
	cfg, err := parseServe(t, nil, "--chat-template-kwargs", `{"enable_thinking":false,"x":1}`).serverConfig()
	if err != nil || string(cfg.ChatTemplateKwargs) != `{"enable_thinking":false,"x":1}` {
		t.Errorf("kwargs %s (%v)", cfg.ChatTemplateKwargs, err)
	}
	cfg, err = parseServe(t, map[string]string{"LLAMA_CHAT_TEMPLATE_KWARGS": `{"y":"z"}`}).serverConfig()
	if err != nil || string(cfg.ChatTemplateKwargs) != `{"y":"z"}` {
		t.Errorf("kwargs from the environment %s (%v)", cfg.ChatTemplateKwargs, err)
	}
	for arg, want := range map[string]string{
		`[1]`:                         "--chat-template-kwargs: want a JSON object",
		`{"enable_thinking":"false"}`: `invalid type for "enable_thinking"`,
	} {
		if _, err := parseServe(t, nil, "--chat-template-kwargs", arg).serverConfig(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", arg, err, want)
		}
	}
}

// TestNoJinjaFlag: --no-jinja accepts a built-in name or a template whose markers name one,
// and refuses a template it cannot render, as llama-server does at startup.
func TestNoJinjaFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--no-jinja"},
		{"--no-jinja", "--chat-template", "command-r"},
		{"--no-jinja", "--chat-template", "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"},
	} {
		if cfg, err := parseServe(t, nil, args...).serverConfig(); err != nil || !cfg.NoJinja {
			t.Errorf("%q: no-jinja %v, %v", args, cfg.NoJinja, err)
		}
	}
	if cfg, err := parseServe(t, nil).serverConfig(); err != nil || cfg.NoJinja {
		t.Errorf("default: no-jinja %v, %v", cfg.NoJinja, err)
	}
	_, err := parseServe(t, nil, "--no-jinja", "--chat-template", "This is not a chat template, it is").serverConfig()
	if err == nil || !strings.Contains(err.Error(), "the supplied chat template is not supported") {
		t.Errorf("--no-jinja with plain text: %v", err)
	}
}
