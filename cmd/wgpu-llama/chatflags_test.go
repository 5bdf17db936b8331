package main

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
	cfg, err := parseServe(t, map[string]string{"LLAMA_ARG_THINK": "none", "LLAMA_ARG_THINK_BUDGET": "0"}).serverConfig()
	if err != nil || cfg.ReasoningFormat != toolcall.ReasoningNone || !cfg.DisableThinking {
		t.Errorf("from the environment: format %v, thinking disabled %v (%v)", cfg.ReasoningFormat, cfg.DisableThinking, err)
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
