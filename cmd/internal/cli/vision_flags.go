package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// visionFlags are llama-server's multimodal flags that select the projector: -mm/--mmproj FILE,
// --mmproj-auto (a file beside the model whose name starts with "mmproj"), and the image size
// bounds; --no-mmproj and --media-path are compatFlags'.
type visionFlags struct {
	mmproj                         string
	auto                           bool
	imageMinTokens, imageMaxTokens int
	fetch                          bool // download http(s) image URLs
}

func (v *visionFlags) register(fs *flag.FlagSet) {
	stringVar(fs, &v.mmproj, "", "multimodal projector GGUF (an mmproj file) for image input", "mm", "mmproj")
	v.auto = false
	fs.Var(&pairFlag{&v.auto, true}, "mmproj-auto", "use a projector beside the model: the first file named mmproj*.gguf in its folder")
	fs.Var(&pairFlag{&v.auto, false}, "no-mmproj-auto", "do not look for a projector beside the model (the default)")
	intVar(fs, &v.imageMinTokens, -1, "fewest positions an image takes, for projectors of variable resolution (a fixed-size one, such as gemma3's, always takes its own)", "image-min-tokens")
	intVar(fs, &v.imageMaxTokens, -1, "most positions an image takes, for projectors of variable resolution", "image-max-tokens")
	boolVar(fs, &v.fetch, false, "download the http(s) image URLs requests name (10 MB, 10 s each), as llama-server does; off, they are refused", "media-fetch")
}

// path is the projector to load for the model at modelPath: none with --no-mmproj, --mmproj's,
// or with --mmproj-auto the first mmproj*.gguf beside the model.
func (v *visionFlags) path(modelPath string, noMmproj bool) (string, error) {
	switch {
	case noMmproj:
		return "", nil
	case v.mmproj != "":
		if st, err := os.Stat(v.mmproj); err != nil || st.IsDir() {
			return "", fmt.Errorf("--mmproj: %s: not a file", v.mmproj)
		}
		return v.mmproj, nil
	case !v.auto || modelPath == "":
		return "", nil
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(modelPath), "mmproj*.gguf"))
	sort.Strings(matches)
	if len(matches) == 0 {
		return "", nil
	}
	return matches[0], nil
}

// check refuses bounds llama-server refuses.
func (v *visionFlags) check() error {
	if v.imageMinTokens == 0 || v.imageMaxTokens == 0 || v.imageMinTokens < -1 || v.imageMaxTokens < -1 {
		return errors.New("--image-min-tokens and --image-max-tokens must be positive (or -1: the projector's)")
	}
	if v.imageMinTokens > 0 && v.imageMaxTokens > 0 && v.imageMinTokens > v.imageMaxTokens {
		return fmt.Errorf("--image-min-tokens %d is above --image-max-tokens %d", v.imageMinTokens, v.imageMaxTokens)
	}
	if strings.TrimSpace(v.mmproj) != v.mmproj {
		return fmt.Errorf("--mmproj: %q has surrounding spaces", v.mmproj)
	}
	return nil
}
