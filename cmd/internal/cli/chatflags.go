package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
	"github.com/wgpu-llama/wgpu-llama/server"
)

// chatFlags are serve's flags for what the model writes: reasoning and infill prompts.
type chatFlags struct {
	kwargs          string
	reasoning       string
	reasoningFormat string
	reasoningBudget int
	budgetMessage   string
	prefill         bool
	spmInfill       bool
}

func (c *chatFlags) register(fs *flag.FlagSet) {
	stringVar(fs, &c.kwargs, "", `chat template variables for every request, a JSON object such as '{"enable_thinking":false}' (a request's chat_template_kwargs override them)`, "chat-template-kwargs")
	stringVar(fs, &c.reasoning, "auto", "use reasoning (thinking) in chats: on, off or auto (templates that support thinking think)", "rea", "reasoning")
	stringVar(fs, &c.reasoningFormat, "auto", "what chat answers do with <think> blocks: none (leave them in the content), deepseek or auto (move them to reasoning_content), deepseek-legacy", "reasoning-format")
	intVar(fs, &c.reasoningBudget, -1, "tokens an answer may spend thinking before the end of its thinking block is forced: -1 unrestricted, 0 closes the block at once", "reasoning-budget")
	stringVar(fs, &c.budgetMessage, "", "text forced before the end of a thinking block the reasoning budget cuts", "reasoning-budget-message")
	c.prefill = true
	fs.Var(&pairFlag{&c.prefill, true}, "prefill-assistant", "continue a conversation's final assistant message rather than start a new turn (the default)")
	fs.Var(&pairFlag{&c.prefill, false}, "no-prefill-assistant", "start a new assistant turn after a final assistant message (a request's continue_final_message still continues it)")
	fs.BoolVar(&c.spmInfill, "spm-infill", false, "put the suffix before the prefix in /infill prompts (suffix/prefix/middle order)")
}

// apply checks the flags and sets them in cfg.
func (c chatFlags) apply(cfg *server.Config) error {
	reasoning, err := chat.ParseReasoning(c.reasoning)
	if err != nil {
		return fmt.Errorf("--reasoning: %w", err)
	}
	rf, err := toolcall.ParseReasoningFormat(c.reasoningFormat)
	if err != nil {
		return fmt.Errorf("--reasoning-format: %w", err)
	}
	if c.reasoningBudget < -1 {
		return fmt.Errorf("--reasoning-budget: want -1 (unrestricted), 0 (close thinking at once) or a number of tokens, got %d", c.reasoningBudget)
	}
	if c.reasoningBudget >= 0 {
		n := c.reasoningBudget
		cfg.ReasoningBudget = &n
	}
	cfg.Reasoning, cfg.ReasoningFormat, cfg.ReasoningBudgetMessage, cfg.SPMInfill = reasoning, rf, c.budgetMessage, c.spmInfill
	cfg.NoPrefillAssistant = !c.prefill
	if t := cfg.ChatTemplate; cfg.NoJinja && t != nil && !t.Builtin() {
		if _, ok := chat.NoJinja(t.Source); !ok {
			return fmt.Errorf("the supplied chat template is not supported: %.80q (without --jinja only llama.cpp's built-in formats are: %s)", t.Source, strings.Join(chat.BuiltinNames(), ", "))
		}
	}
	if c.kwargs != "" {
		var kw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.kwargs), &kw); err != nil || kw == nil {
			return fmt.Errorf("--chat-template-kwargs: want a JSON object, got %q", c.kwargs)
		}
		if v, ok := kw["enable_thinking"]; ok && bytes.HasPrefix(bytes.TrimSpace(v), []byte(`"`)) {
			return errors.New(`--chat-template-kwargs: invalid type for "enable_thinking" (expected boolean, got string)`)
		}
		cfg.ChatTemplateKwargs = json.RawMessage(c.kwargs)
	}
	return nil
}
