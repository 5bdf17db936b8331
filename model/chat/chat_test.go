package chat

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

func TestChatML(t *testing.T) {
	tests := []struct {
		name string
		msgs []Message
		add  bool
		want string
	}{
		{"empty", nil, false, ""},
		{"empty with generation prompt", nil, true, "<|im_start|>assistant\n"},
		{
			"system and user",
			[]Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}},
			true,
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
		},
		{
			"no generation prompt",
			[]Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello"}},
			false,
			"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ChatML(tt.msgs, tt.add); got != tt.want {
				t.Errorf("ChatML() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestChatMLReference renders the request bodies that llama-server answered on /apply-template
// (add_generation_prompt defaults to true there) and compares byte for byte.
func TestChatMLReference(t *testing.T) {
	for _, set := range []string{"a", "b", "c"} {
		t.Run(set, func(t *testing.T) {
			reqPath := shareddata.Path(t, "reference", "chat-templates", "llama-cpp-chatml."+set+".request.json")
			wantPath := shareddata.Path(t, "reference", "chat-templates", "llama-cpp-chatml."+set+".prompt.txt")
			var req struct {
				Messages []struct {
					Role    string  `json:"role"`
					Content *string `json:"content"`
				} `json:"messages"`
			}
			data, err := os.ReadFile(reqPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &req); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatal(err)
			}
			var msgs []Message
			for _, m := range req.Messages {
				msg := Message{Role: m.Role}
				if m.Content != nil { // llama-server turns null content into ""
					msg.Content = *m.Content
				}
				msgs = append(msgs, msg)
			}
			got, err := ForModel("", nil).Render(msgs, true)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("rendered\n%q\nwant\n%q", got, want)
			}
		})
	}
}

func TestChatMLSourceMatchesReference(t *testing.T) {
	p := shareddata.Path(t, "reference", "chat-templates", "llama-cpp-chatml.jinja")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// The file keeps a trailing newline that llama.cpp's source constant does not have.
	if got, want := ChatMLSource, string(data); got != want && got+"\n" != want {
		t.Errorf("ChatMLSource = %q, reference file %q", got, want)
	}
}

func TestForModelUsesGGUFTemplate(t *testing.T) {
	tmpl := ForModel("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}", nil).WithSpecialTokens("<s>", "</s>")
	if tmpl.Name != "gguf" {
		t.Errorf("ForModel with a GGUF template = %q, want the GGUF template", tmpl.Name)
	}
	got, err := tmpl.Render([]Message{{Role: "user", Content: "Hi"}}, true)
	if err != nil || got != "<s>Hi" {
		t.Errorf("Render = %q, %v; want %q", got, err, "<s>Hi")
	}
}

func TestForModelFallsBackToChatML(t *testing.T) {
	for _, src := range []string{"", "{% if %}"} {
		tmpl := ForModel(src, nil)
		if tmpl.Source != ChatMLSource || tmpl.Name != "chatml" {
			t.Errorf("ForModel(%q) = %q/%q, want the ChatML fallback", src, tmpl.Name, tmpl.Source)
		}
	}
}
