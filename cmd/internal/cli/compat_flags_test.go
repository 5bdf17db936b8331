package cli

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/server"
)

// TestCompatFlags: llama-server's flags that change nothing here parse under each of their
// names and from their environment variables, with llama-server's defaults.
func TestCompatFlags(t *testing.T) {
	d := parseServe(t, nil)
	if d.compat.flashAttn != "auto" || d.model.swaFull || d.compat.grpAttnN != 1 || d.compat.grpAttnW != 512 ||
		d.model.cacheRAM != 8192 || !d.model.cacheIdleSlots || !d.compat.contBatching || d.compat.noMmproj ||
		d.compat.backendSampling || d.compat.mediaPath != "" || d.model.verbose || d.threads != -1 || d.gpuLayers != "auto" {
		t.Errorf("defaults: %+v verbose %v", d.compat, d.model.verbose)
	}
	media := t.TempDir()
	for _, args := range [][]string{
		{"-fa", "on", "--swa-full", "-gan", "1", "-gaw", "256", "-cram", "100", "--no-cache-idle-slots", "-nocb",
			"--no-mmproj", "-bs", "--media-path", media, "-v", "-t", "4", "-ngl", "99"},
		{"--flash-attn", "on", "--swa-full", "--grp-attn-n", "1", "--grp-attn-w", "256", "--cache-ram", "100",
			"--no-cache-idle-slots", "--no-cont-batching", "--no-mmproj", "--backend-sampling", "--media-path", media,
			"--verbose", "--threads", "4", "--n-gpu-layers", "99"},
		{"--flash-attn=on", "--swa-full", "--grp_attn_w", "256", "--cache_ram", "100", "--no_cache_idle_slots",
			"--no-cont-batching", "--no_mmproj", "--backend_sampling", "--media_path", media, "--log-verbose", "--threads=4", "--gpu-layers", "99"},
	} {
		f := parseServe(t, nil, args...)
		c := f.compat
		if c.flashAttn != "on" || !f.model.swaFull || c.grpAttnW != 256 || f.model.cacheRAM != 100 || f.model.cacheIdleSlots ||
			c.contBatching || !c.noMmproj || !c.backendSampling || c.mediaPath != media || !f.model.verbose || f.threads != 4 || f.gpuLayers != "99" {
			t.Errorf("%q: %+v verbose %v threads %d ngl %q", args, c, f.model.verbose, f.threads, f.gpuLayers)
		}
	}
	env := map[string]string{
		"LLAMA_ARG_FLASH_ATTN": "off", "LLAMA_ARG_SWA_FULL": "1", "LLAMA_ARG_GRP_ATTN_N": "1", "LLAMA_ARG_GRP_ATTN_W": "1024",
		"LLAMA_ARG_CACHE_RAM": "0", "LLAMA_ARG_CACHE_IDLE_SLOTS": "false", "LLAMA_ARG_CONT_BATCHING": "disabled",
		"LLAMA_ARG_NO_MMPROJ": "true", "LLAMA_ARG_BACKEND_SAMPLING": "on", "LLAMA_ARG_THREADS": "3", "LLAMA_ARG_N_GPU_LAYERS": "all",
	}
	f := parseServe(t, env)
	c := f.compat
	if c.flashAttn != "off" || !f.model.swaFull || c.grpAttnW != 1024 || f.model.cacheRAM != 0 || f.model.cacheIdleSlots || c.contBatching ||
		!c.noMmproj || !c.backendSampling || f.threads != 3 || f.gpuLayers != "all" {
		t.Errorf("from the environment: %+v threads %d ngl %q", c, f.threads, f.gpuLayers)
	}
	// The command line wins over the environment, whichever of a pair it names.
	if f := parseServe(t, env, "--cache-idle-slots", "-fa", "auto"); !f.model.cacheIdleSlots || f.compat.flashAttn != "auto" {
		t.Errorf("command line over environment: %+v", f.compat)
	}
}

// TestDashFlagNames: --a_b is --a-b, as llama.cpp reads it, but values are never rewritten.
func TestDashFlagNames(t *testing.T) {
	f := parseServe(t, nil, "--alias", "--my_model", "--backend_sampling", "--chat_template", "chatml")
	if f.alias != "--my_model" || !f.compat.backendSampling || f.tmplName != "chatml" {
		t.Errorf("alias %q backend sampling %v template %q", f.alias, f.compat.backendSampling, f.tmplName)
	}
	if _, err := parseServeFlags([]string{"--no_such_flag"}, io.Discard, func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "unknown flag --no_such_flag") {
		t.Errorf("an unknown underscored flag: %v", err)
	}
}

// TestAliasesAndTags: --alias is a set whose first name in sort order is the model's name, as
// llama-server's std::set; --tags lists tags; both reach /v1/models through the server config.
func TestAliasesAndTags(t *testing.T) {
	f := parseServe(t, nil, "--alias", "tinyllama-2,fim,code,fim", "--tags", " chat, fim,small")
	cfg, err := f.serverConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Alias != "code" || !reflect.DeepEqual(cfg.Aliases, []string{"code", "fim", "tinyllama-2"}) ||
		!reflect.DeepEqual(cfg.Tags, []string{"chat", "fim", "small"}) {
		t.Errorf("alias %q aliases %q tags %q", cfg.Alias, cfg.Aliases, cfg.Tags)
	}
	f = parseServe(t, map[string]string{"LLAMA_ARG_TAGS": "a,b", "LLAMA_ARG_ALIAS": "x"})
	if cfg, _ := f.serverConfig(); cfg.Alias != "x" || !reflect.DeepEqual(cfg.Tags, []string{"a", "b"}) {
		t.Errorf("from the environment: alias %q tags %q", cfg.Alias, cfg.Tags)
	}
	if cfg, _ := parseServe(t, nil).serverConfig(); cfg.Alias != "" || cfg.Aliases != nil || cfg.Tags != nil {
		t.Errorf("defaults: alias %q aliases %q tags %q", cfg.Alias, cfg.Aliases, cfg.Tags)
	}
}

// TestCORSFlags: --cors-origins and its companions become the server's CORS policy, from the
// command line or the environment.
func TestCORSFlags(t *testing.T) {
	policy := func(f *serveFlags) server.CORS {
		t.Helper()
		cfg, err := f.serverConfig()
		if err != nil {
			t.Fatal(err)
		}
		return cfg.CORS
	}
	if got := policy(parseServe(t, nil)); got != (server.CORS{Origins: "*", Methods: server.DefaultCORSMethods, Headers: "*"}) {
		t.Errorf("default policy %+v", got)
	}
	got := policy(parseServe(t, nil, "--cors-origins", "localhost", "--cors-methods", "GET, POST", "--cors-headers", "Authorization", "--no-cors-credentials"))
	if got != (server.CORS{Origins: "localhost", Methods: "GET, POST", Headers: "Authorization", NoCredentials: true}) {
		t.Errorf("flags: %+v", got)
	}
	env := map[string]string{"LLAMA_ARG_CORS_ORIGINS": "https://a.test,https://b.test", "LLAMA_ARG_CORS_CREDENTIALS": "0",
		"LLAMA_ARG_CORS_METHODS": "GET", "LLAMA_ARG_CORS_HEADERS": "X-Api-Key"}
	if got := policy(parseServe(t, env)); got != (server.CORS{Origins: "https://a.test,https://b.test", Methods: "GET", Headers: "X-Api-Key", NoCredentials: true}) {
		t.Errorf("environment: %+v", got)
	}
	if got := policy(parseServe(t, env, "--cors-origins", "*", "--cors-credentials")); got.Origins != "*" || got.NoCredentials {
		t.Errorf("command line over environment: %+v", got)
	}
}

func TestCompatFlagErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-fa", "maybe"}, `-fa/--flash-attn: "maybe" is not on, off or auto`},
		{[]string{"--grp-attn-n", "0"}, "--grp-attn-n and --grp-attn-w must be at least 1"},
		{[]string{"--grp-attn-n", "3", "--grp-attn-w", "512"}, "--grp-attn-w (512) must be a multiple of --grp-attn-n (3)"},
		{[]string{"--grp-attn-n", "4"}, "self-extend) is not supported"},
		{[]string{"--grp-attn-w", "x"}, `invalid value "x" for flag -grp-attn-w`},
		{[]string{"--cache-ram", "-2"}, "--cache-ram must be -1"},
		{[]string{"--mmproj-url", "https://example.com/mmproj.gguf"}, "--mmproj-url: projectors are not downloaded"},
		{[]string{"--media-path", file}, "--media-path: not a directory"},
		{[]string{"--media-path", file + ".missing"}, "--media-path: not a directory"},
		{[]string{"-ngl", "many"}, `-ngl/--n-gpu-layers: "many" is not a number of layers`},
		{[]string{"-t", "x"}, `invalid value "x" for flag -t`},
		{[]string{"--cors-origins", ""}, "--cors-origins: empty"},
		{[]string{"--cors-origins", "a.test,,b.test"}, "--cors-origins"},
		{[]string{"--cors-origins", "localhost,https://a.test"}, "stand alone"},
		{[]string{"--cors-methods", " "}, "--cors-methods"},
		{[]string{"--no-cors-credentials=maybe"}, "no-cors-credentials"},
	} {
		_, err := parseServeFlags(tt.args, io.Discard, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.args, err, tt.want)
		}
	}
	if _, err := parseServeFlags(nil, io.Discard, func(k string) string {
		return map[string]string{"LLAMA_ARG_FLASH_ATTN": "sometimes"}[k]
	}); err == nil || !strings.Contains(err.Error(), "--flash-attn") {
		t.Errorf("a bad LLAMA_ARG_FLASH_ATTN: %v", err)
	}
}
