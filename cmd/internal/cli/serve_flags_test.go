package cli

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

func parseServe(t *testing.T, env map[string]string, args ...string) *serveFlags {
	t.Helper()
	f, err := parseServeFlags(args, io.Discard, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return f
}

func TestServeFlagDefaults(t *testing.T) {
	f := parseServe(t, nil)
	cfg, err := f.serverConfig()
	if err != nil {
		t.Fatal(err)
	}
	if f.host != "127.0.0.1" || f.port != 8080 || f.timeout != 600 || !f.slots || f.metrics || f.props || f.batch != 2048 || f.model.batch != 512 {
		t.Errorf("defaults: %+v", f)
	}
	d := engine.DefaultParams()
	if p := cfg.Defaults; p.NPredict != -1 || p.Temperature != d.Temperature || p.TopK != 40 || p.TopP != d.TopP || p.MinP != d.MinP || p.Seed != engine.SeedRandom {
		t.Errorf("default generation settings %+v", p)
	}
	if cfg.NoSlots || cfg.Metrics || cfg.WriteTimeout != 600*time.Second || cfg.SSEPingInterval != 30*time.Second || len(cfg.APIKeys) != 0 {
		t.Errorf("server config %+v", cfg)
	}
	// -np -1, llama-server's default: 4 slots sharing the whole context.
	ecfg, err := parseServe(t, nil, "-m", "model.gguf").model.engineConfig("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ecfg.Slots != 4 || !ecfg.KVUnified || ecfg.CtxSize != 4096 {
		t.Errorf("default slots %d unified %v n_ctx %d, want 4, true, 4096", ecfg.Slots, ecfg.KVUnified, ecfg.CtxSize)
	}
	if ecfg, err = parseServe(t, nil, "-m", "model.gguf", "-np", "2").model.engineConfig("", nil); err != nil || ecfg.Slots != 2 || ecfg.KVUnified {
		t.Errorf("-np 2: slots %d unified %v (%v), want 2 split", ecfg.Slots, ecfg.KVUnified, err)
	}
}

func TestServeFlags(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte("# comment\nfile-key-1\n\n  file-key-2  \r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	slotDir := t.TempDir()
	f := parseServe(t, nil,
		"--host", "0.0.0.0", "--port", "9000", "-a", "mine,other", "-c", "1024", "-np", "2", "-b", "64", "-ub", "128",
		"-n", "32", "--temp", "0.5", "--top-k", "10", "--top-p", "0.9", "--min-p", "0.1", "--seed", "42",
		"-ngl", "99", "-t", "8", "--api-key", "k1,k2", "--api-key", "k3", "--api-key-file", keyFile,
		"--metrics", "--props", "--no-slots", "--slot-save-path", slotDir, "-to", "30", "--jinja",
		"--chat-template", "chatml")
	cfg, err := f.serverConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Alias != "mine" || f.model.ctxSize != 1024 || f.model.slots != 2 || f.port != 9000 {
		t.Errorf("flags %+v", f)
	}
	if got := strings.Join(cfg.APIKeys, " "); got != "k1 k2 k3 file-key-1 file-key-2" {
		t.Errorf("API keys %q", got)
	}
	p := cfg.Defaults
	if p.NPredict != 32 || p.Temperature != 0.5 || p.TopK != 10 || p.TopP != 0.9 || p.MinP != 0.1 || p.Seed != 42 {
		t.Errorf("generation defaults %+v", p)
	}
	if !cfg.Metrics || !cfg.Props || !cfg.NoSlots || cfg.SlotSavePath != slotDir || cfg.WriteTimeout != 30*time.Second || cfg.ChatTemplate == nil {
		t.Errorf("server config %+v", cfg)
	}
	for _, tc := range []struct {
		arg  string
		want time.Duration
	}{{"5", 5 * time.Second}, {"0", -1}, {"-1", -1}} {
		if cfg, err := parseServe(t, nil, "--sse-ping-interval", tc.arg).serverConfig(); err != nil || cfg.SSEPingInterval != tc.want {
			t.Errorf("--sse-ping-interval %s: %v, %v; want %v", tc.arg, cfg.SSEPingInterval, err, tc.want)
		}
	}
	if f := parseServe(t, nil, "--max-queue", "5"); f.maxQueue != 5 || parseServe(t, nil).maxQueue != -1 {
		t.Errorf("--max-queue: %d", f.maxQueue)
	}
	if f := parseServe(t, nil, "-m", "x.gguf", "--gpu-memory", "3072"); f.model.gpuMemory != 3072 {
		t.Errorf("--gpu-memory: %d", f.model.gpuMemory)
	} else if cfg, err := f.model.engineConfig("", nil); err != nil || cfg.GPUMemory != 3072<<20 {
		t.Errorf("--gpu-memory 3072: engine.Config.GPUMemory %d, %v", cfg.GPUMemory, err)
	}
	if _, err := parseServe(t, nil, "-m", "x.gguf", "--gpu-memory", "-1").model.engineConfig("", nil); err == nil || !strings.Contains(err.Error(), "--gpu-memory") {
		t.Errorf("--gpu-memory -1: %v", err)
	}
	if maxQueueFor(2) != 64 || maxQueueFor(16) != 128 {
		t.Errorf("default queue for 2 slots %d, for 16 %d", maxQueueFor(2), maxQueueFor(16))
	}
	if f := parseServe(t, nil, "--no-slots", "--slots"); !f.slots {
		t.Error("--slots after --no-slots left slots off")
	}
	if f := parseServe(t, nil, "--slots=false"); f.slots {
		t.Error("--slots=false left slots on")
	}
}

func TestServeFlagsFromEnvironment(t *testing.T) {
	env := map[string]string{
		"LLAMA_ARG_PORT": "9100", "LLAMA_ARG_CTX_SIZE": "2048", "LLAMA_API_KEY": "env-key",
		"LLAMA_ARG_ENDPOINT_METRICS": "1", "LLAMA_ARG_ENDPOINT_SLOTS": "false", "LLAMA_ARG_N_PREDICT": "7",
		"LLAMA_ARG_TIMEOUT": "15", "LLAMA_OFFLINE": "true", "LLAMA_ARG_HF_REPO": "org/name:Q8_0", "HF_TOKEN": "hf_x",
		"LLAMA_ARG_ALIAS": "env-alias",
	}
	f := parseServe(t, env, "--port", "9200")
	if f.port != 9200 {
		t.Errorf("the command line loses to the environment: port %d", f.port)
	}
	if f.model.ctxSize != 2048 || !f.metrics || f.slots || f.nPredict != 7 || f.timeout != 15 || f.alias != "env-alias" {
		t.Errorf("from the environment: %+v", f)
	}
	if f.hf != (hfFlags{repo: "org/name:Q8_0", token: "hf_x", offline: true}) || strings.Join(f.apiKeys, ",") != "env-key" {
		t.Errorf("from the environment: hf %+v keys %q", f.hf, f.apiKeys)
	}
	if _, err := parseServeFlags(nil, io.Discard, func(k string) string {
		return map[string]string{"LLAMA_ARG_ENDPOINT_METRICS": "maybe"}[k]
	}); err == nil || !strings.Contains(err.Error(), "LLAMA_ARG_ENDPOINT_METRICS") {
		t.Errorf("a bad boolean in the environment: %v", err)
	}
}

func TestServeFlagErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "unknown flag --bogus"},
		{[]string{"-bogus=1"}, "unknown flag -bogus"},
		{[]string{"--draft-maximum", "4"}, "unknown flag --draft-maximum"},
		{[]string{"--port", "x"}, `invalid value "x" for flag -port`},
		{[]string{"--seed", "-2"}, "--seed must be between -1 and 4294967295"},
		{[]string{"-n", "-3"}, "-n must be -1"},
		{[]string{"--slot-save-path", file}, "not a directory"},
		{[]string{"--api-key-file", file + ".missing"}, "--api-key-file"},
		{[]string{"-m", "a.gguf", "-hf", "org/name"}, "not both"},
		{[]string{"--hf-file", "x.gguf"}, "--hf-file needs --hf-repo"},
		{[]string{"positional"}, `unexpected argument "positional"`},
		{[]string{"--sleep-idle-seconds", "0"}, "--sleep-idle-seconds must be -1 (never) or a positive number of seconds, got 0"},
		{[]string{"--sleep-idle-seconds", "-2"}, "--sleep-idle-seconds must be -1"},
	} {
		_, err := parseServeFlags(tt.args, io.Discard, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestHFRepoResolvesOffline: --hf-repo ORG/NAME finds the model in a prepared Hugging Face
// cache without the network.
func TestHFRepoResolvesOffline(t *testing.T) {
	cache := t.TempDir()
	const commit = "89abcdef0123456789abcdef0123456789abcdef"
	repo := filepath.Join(cache, "models--org--name")
	snap := filepath.Join(repo, "snapshots", commit)
	for _, p := range []string{filepath.Join(repo, "refs"), snap} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit+"\n"), 0o644)
	for _, n := range []string{"name-Q4_K_M.gguf", "name-Q8_0.gguf"} {
		os.WriteFile(filepath.Join(snap, n), []byte("gguf"), 0o644)
	}
	t.Setenv("LLAMA_CACHE", cache)
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1/") // unreachable: offline must not ask

	var progress bytes.Buffer
	logger := log.New(io.Discard)
	for args, want := range map[string]string{
		"--hf-repo org/name --offline":                     "name-Q4_K_M.gguf",
		"-hf org/name:q8_0 --offline":                      "name-Q8_0.gguf",
		"-hfr org/name --hf-file name-Q8_0.gguf --offline": "name-Q8_0.gguf",
		"--hf-repo org/name":                               "name-Q4_K_M.gguf", // the Hub is unreachable: the cache answers
	} {
		f := parseServe(t, nil, strings.Fields(args)...)
		got, err := f.hf.resolve(context.Background(), &progress, logger)
		if err != nil || got != filepath.Join(snap, want) {
			t.Errorf("%s: %q %v, want %s", args, got, err, want)
		}
	}
	f := parseServe(t, nil, "--hf-repo", "org/missing", "--offline")
	if _, err := f.hf.resolve(context.Background(), &progress, logger); err == nil || !strings.Contains(err.Error(), "offline") {
		t.Errorf("a repository missing offline: %v", err)
	}
	if progress.Len() != 0 {
		t.Errorf("progress output without a download: %q", progress.String())
	}
}

// The built-in UI by default; --no-ui (and llama-server's older --no-webui) serve none; --path
// serves a directory's build, and refuses one without index.html.
func TestServeUIFlags(t *testing.T) {
	cfg, err := parseServe(t, nil).serverConfig()
	if err != nil || cfg.UI == nil {
		t.Fatalf("default: UI %v (%v), want the built-in one", cfg.UI, err)
	}
	if _, err := fs.Stat(cfg.UI, "index.html"); err != nil {
		t.Errorf("built-in UI: %v", err)
	}
	for _, flag := range []string{"--no-ui", "--no-webui"} {
		if cfg, err := parseServe(t, nil, flag).serverConfig(); err != nil || cfg.UI != nil {
			t.Errorf("%s: UI %v (%v), want none", flag, cfg.UI, err)
		}
	}
	dir := t.TempDir()
	if _, err := parseServe(t, nil, "--path", dir).serverConfig(); err == nil || !strings.Contains(err.Error(), "no index.html") {
		t.Errorf("--path without index.html: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("<!doctype html>dev"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err = parseServe(t, nil, "--path", dir).serverConfig()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := fs.ReadFile(cfg.UI, "index.html"); err != nil || string(b) != "<!doctype html>dev" {
		t.Errorf("--path: index %q (%v)", b, err)
	}
}
