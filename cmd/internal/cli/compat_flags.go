package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/charmbracelet/log"
)

// compatFlags are llama-server flags whose setting is already how wgpu-llama works, or names a
// feature it does not have: each is parsed and checked as llama-server does, so scripts and
// service files written for llama-server run unchanged. README.md says for each why it changes
// nothing here. (--no-mmproj and --media-path are here too, though they now act: see
// visionFlags and server.Config.MediaPath.)
type compatFlags struct {
	flashAttn          string // -fa on|off|auto: attention is one fused shader either way   // the KV cache always holds every layer's whole context
	grpAttnN, grpAttnW int    // self-extend; only 1 (off) is supported
	contBatching       bool   // the engine always batches the slots' steps together
	mmprojURL          string
	noMmproj           bool
	backendSampling    bool
	mediaPath          string
}

func (c *compatFlags) register(fs *flag.FlagSet) {
	stringVar(fs, &c.flashAttn, "auto", "flash attention: on, off or auto; accepted for llama-server compatibility (attention is one fused kernel either way)", "fa", "flash-attn")
	intVar(fs, &c.grpAttnN, 1, "group-attention (self-extend) factor; only 1 (off) is supported", "gan", "grp-attn-n")
	intVar(fs, &c.grpAttnW, 512, "group-attention (self-extend) width", "gaw", "grp-attn-w")
	c.contBatching = true
	for _, n := range []string{"cb", "cont-batching"} {
		fs.Var(&pairFlag{&c.contBatching, true}, n, "continuous batching (always on here)")
	}
	for _, n := range []string{"nocb", "no-cont-batching"} {
		fs.Var(&pairFlag{&c.contBatching, false}, n, "accepted for llama-server compatibility; the engine always batches the slots together")
	}
	stringVar(fs, &c.mmprojURL, "", "URL of a multimodal projector; refused: download it and give --mmproj FILE", "mmu", "mmproj-url")
	fs.BoolVar(&c.noMmproj, "no-mmproj", false, "load no multimodal projector, even with --mmproj or --mmproj-auto")
	boolVar(fs, &c.backendSampling, false, "sample on the GPU backend; accepted for compatibility (the GPU already picks the candidates, sampling gives the same draws either way)", "bs", "backend-sampling")
	stringVar(fs, &c.mediaPath, "", "directory whose files requests may name as file:// image URLs (default: none may)", "media-path")
}

// check validates the values as llama-server does, naming the flag at fault.
func (c *compatFlags) check() error {
	switch strings.ToLower(c.flashAttn) {
	case "on", "enabled", "true", "1", "off", "disabled", "false", "0", "auto", "-1":
	default:
		return fmt.Errorf("-fa/--flash-attn: %q is not on, off or auto", c.flashAttn)
	}
	if c.grpAttnN < 1 || c.grpAttnW < 1 {
		return fmt.Errorf("--grp-attn-n and --grp-attn-w must be at least 1, got %d and %d", c.grpAttnN, c.grpAttnW)
	}
	if c.grpAttnN != 1 {
		if c.grpAttnW%c.grpAttnN != 0 {
			return fmt.Errorf("--grp-attn-w (%d) must be a multiple of --grp-attn-n (%d)", c.grpAttnW, c.grpAttnN)
		}
		return fmt.Errorf("--grp-attn-n %d: group attention (self-extend) is not supported; use --context-shift or a larger -c", c.grpAttnN)
	}
	if c.mmprojURL != "" {
		return errors.New("--mmproj-url: projectors are not downloaded; download the file and give --mmproj FILE")
	}
	if c.mediaPath != "" {
		if st, err := os.Stat(c.mediaPath); err != nil || !st.IsDir() {
			return fmt.Errorf("--media-path: not a directory: %s", c.mediaPath)
		}
	}
	return nil
}

// log notes at debug level the settings that change nothing here.
func (c *compatFlags) log(logger *log.Logger) {
	logger.Debug("accepted for llama-server compatibility", "flash_attn", c.flashAttn,
		"cont_batching", c.contBatching,
		"no_mmproj", c.noMmproj, "backend_sampling", c.backendSampling, "media_path", c.mediaPath)
}
