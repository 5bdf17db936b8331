package cli

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
)

// tokenizeCmd runs `wgpu-llama tokenize ARGS` through run with in as standard input.
func tokenizeCmd(t *testing.T, in string, args ...string) (string, string, error) {
	t.Helper()
	old := stdin
	stdin = strings.NewReader(in)
	t.Cleanup(func() { stdin = old })
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"tokenize"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestTokenizeCommand(t *testing.T) {
	stories := shareddata.Path(t, "models", "stories260K.gguf")
	gpt2 := shareddata.Path(t, "models", "vocab", "ggml-vocab-gpt-2.gguf")
	textFile := writeTemp(t, "text.txt", []byte("Once upon a time\n"))
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"ids without BOS", "", []string{"-m", stories, "--ids", "--no-bos", "Once upon a time"}, "[403, 407, 261, 378]\n"},
		{"ids with BOS", "", []string{"-m", stories, "--ids", "Once upon a time"}, "[1, 403, 407, 261, 378]\n"},
		{"flags after the text", "", []string{"-m", stories, "Once upon a time", "--ids"}, "[1, 403, 407, 261, 378]\n"},
		{"id and piece lines", "", []string{"--model", stories, "-p", "Once upon"},
			"     1 -> '<s>'\n   403 -> ' Once'\n   407 -> ' upon'\n"},
		{"pieces", "", []string{"-m", stories, "--pieces", "Once upon"}, `["<s>", " Once", " upon"]` + "\n"},
		{"special text parsed", "", []string{"-m", stories, "--ids", "--no-bos", "<s>"}, "[1]\n"},
		{"special text as characters", "", []string{"-m", stories, "--ids", "--no-bos", "--no-parse-special", "<s>"}, "[410, 504, 419, 505]\n"},
		{"stdin keeps the trailing newline", "Once upon a time\n", []string{"-m", stories, "--ids", "--stdin"}, "[1, 403, 407, 261, 378, 13]\n"},
		{"file keeps the trailing newline", "", []string{"-m", stories, "--ids", "-f", textFile}, "[1, 403, 407, 261, 378, 13]\n"},
		{"empty text", "", []string{"-m", stories, "--ids", "--no-bos", "-p", ""}, "[]\n"},
		{"count", "", []string{"-m", stories, "--ids", "--show-count", "Once"}, "[1, 403]\nTotal number of tokens: 2\n"},
		// A vocabulary-only file (no tensors); GPT-2 adds no BOS.
		{"vocabulary-only GGUF", "", []string{"-m", gpt2, "--ids", "Hello world"}, "[15496, 995]\n"},
		{"vocabulary-only GGUF from stdin", "Hello world\n", []string{"-m", gpt2, "--stdin"},
			" 15496 -> 'Hello'\n   995 -> ' world'\n   198 -> '\n'\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := tokenizeCmd(t, tt.stdin, tt.args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			if out != tt.want {
				t.Errorf("output %q, want %q", out, tt.want)
			}
		})
	}
}

func TestTokenizeCommandErrors(t *testing.T) {
	stories := shareddata.Path(t, "models", "stories260K.gguf")
	notGGUF := writeTemp(t, "x.gguf", []byte("not a gguf file"))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no text", []string{"-m", stories}, "give the text once, as TEXT, -p TEXT, -f FILE or --stdin (got 0)"},
		{"two sources", []string{"-m", stories, "-p", "a", "b"}, "give the text once"},
		{"stdin and text", []string{"-m", stories, "--stdin", "b"}, "give the text once"},
		{"two texts", []string{"-m", stories, "a", "b"}, "want one TEXT argument, got 2"},
		{"ids and pieces", []string{"-m", stories, "--ids", "--pieces", "a"}, "--ids or --pieces, not both"},
		{"missing model", []string{"-m", filepath.Join(t.TempDir(), "none.gguf"), "a"}, "no such file"},
		{"not a GGUF", []string{"-m", notGGUF, "a"}, notGGUF},
		{"missing text file", []string{"-m", stories, "-f", filepath.Join(t.TempDir(), "none.txt")}, "no such file"},
		{"unknown flag", []string{"-m", stories, "--bogus", "a"}, "flag provided but not defined: -bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := tokenizeCmd(t, "", tt.args...)
			if err == nil {
				t.Fatalf("no error; output %q", out)
			}
			if msg := err.Error() + "\n" + errOut; !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want it to mention %q", msg, tt.want)
			}
		})
	}
}

// errReader fails every read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestTokenizeCommandStdinError(t *testing.T) {
	stories := shareddata.Path(t, "models", "stories260K.gguf")
	old := stdin
	stdin = errReader{}
	t.Cleanup(func() { stdin = old })
	err := runTokenize([]string{"-m", stories, "--stdin"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "reading standard input") {
		t.Errorf("err = %v", err)
	}
}

// TestServeChatTemplateFlags checks serve's --chat-template and --chat-template-file, which are
// resolved before the server listens or loads anything.
func TestServeChatTemplateFlags(t *testing.T) {
	file := writeTemp(t, "tmpl.jinja", []byte("{% for m in messages %}{{ m.content }}{% endfor %}"))
	broken := writeTemp(t, "broken.jinja", []byte("{% for %}"))
	missing := filepath.Join(t.TempDir(), "none.jinja")
	builtins := strings.Join(chat.BuiltinNames(), ", ")

	for _, tt := range []struct {
		name, nameOrFile, file, want string
	}{
		{"none", "", "", ""},
		{"built-in", "llama3", "", "llama3"},
		// As llama-server, any other --chat-template is Jinja source, here plain text.
		{"source via --chat-template", "This is not a chat template, it is", "", "--chat-template"},
		{"--chat-template-file", "", file, file},
	} {
		tmpl, err := chatTemplateFlag(tt.nameOrFile, tt.file)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got := ""; tmpl != nil {
			got = tmpl.Name
			if got != tt.want {
				t.Errorf("%s: template %q, want %q", tt.name, got, tt.want)
			}
		} else if tt.want != "" {
			t.Errorf("%s: no template", tt.name)
		}
	}

	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"source that does not parse", []string{"--chat-template", "{% for %}"}, []string{"--chat-template: the supplied chat template is not supported"}},
		{"unreadable file", []string{"--chat-template-file", missing}, []string{"--chat-template-file", "no such file", builtins}},
		{"template that does not parse", []string{"--chat-template-file", broken}, []string{"parsing chat template " + broken}},
		{"both", []string{"--chat-template", "chatml", "--chat-template-file", file}, []string{"not both"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var errOut bytes.Buffer
			err := run(context.Background(), append([]string{"serve", "--jinja", "--port", "0"}, tt.args...), io.Discard, &errOut)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q, want it to mention %q", err, w)
				}
			}
		})
	}
}
