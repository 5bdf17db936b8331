package router

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/hf"
)

// Sources of a model, as llama-server's router names them in GET /models.
const (
	SourceCache     = "cache"
	SourceModelsDir = "models_dir"
	SourcePreset    = "preset"
)

// defaultStopTimeout is how long a child gets to exit after being asked before it is killed.
const defaultStopTimeout = 10 * time.Second

// Keys of a preset section that configure the router, not the child's flags.
const (
	keyLoadOnStartup = "load-on-startup"
	keyStopTimeout   = "stop-timeout"
	keyDedup         = "dedup-cache-models"
)

// Model is one model the router can serve: its name, where it was found and the options
// (flag name → value) its child is started with.
type Model struct {
	Name    string
	Source  string
	Options map[string]string
	// Hidden is a cache entry a preset stands for (dedup-cache-models): still usable by
	// name, left out of GET /models.
	Hidden bool
}

// Args renders the options as the child's command-line flags, sorted by name so that the
// same preset gives the same command line; router-only keys are left out.
func (m *Model) Args() []string {
	keys := make([]string, 0, len(m.Options))
	for k := range m.Options {
		if k != keyLoadOnStartup && k != keyStopTimeout && k != keyDedup {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	args := make([]string, 0, len(keys))
	for _, k := range keys {
		args = append(args, "--"+k+"="+m.Options[k])
	}
	return args
}

// LoadOnStartup reports whether the preset asks for the model to be loaded when the router starts.
func (m *Model) LoadOnStartup() bool { return truthy(m.Options[keyLoadOnStartup]) }

// StopTimeout is the preset's stop-timeout (seconds), else 10 seconds.
func (m *Model) StopTimeout() time.Duration {
	if n, err := strconv.Atoi(m.Options[keyStopTimeout]); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	return defaultStopTimeout
}

// equal reports whether two models would start the same child.
func (m *Model) equal(o *Model) bool {
	if len(m.Options) != len(o.Options) {
		return false
	}
	for k, v := range m.Options {
		if o.Options[k] != v {
			return false
		}
	}
	return true
}

func truthy(v string) bool {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	return err == nil && b || v == "on" || v == "yes"
}

// Catalog says where models are found: the Hugging Face cache, a models directory and a
// preset file. Empty fields are sources not used.
type Catalog struct {
	CacheDir   string
	ModelsDir  string
	PresetFile string
}

// Scan reads every source and returns the models by name: cache entries, then the models
// directory (which wins over a cache entry of the same name), then preset sections, which
// add models or override options of one found before. The preset's [*] section applies
// under every model's own options.
func (c Catalog) Scan() (map[string]*Model, error) {
	models := map[string]*Model{}
	if c.CacheDir != "" {
		cached, err := hf.ListCache(c.CacheDir)
		if err != nil {
			return nil, err
		}
		for _, m := range cached {
			models[m.ID()] = &Model{Name: m.ID(), Source: SourceCache, Options: map[string]string{"hf-repo": m.ID()}}
		}
	}
	if c.ModelsDir != "" {
		local, err := scanModelsDir(c.ModelsDir)
		if err != nil {
			return nil, err
		}
		for _, m := range local {
			models[m.Name] = m
		}
	}
	global := map[string]string{}
	if c.PresetFile != "" {
		sections, err := ReadPreset(c.PresetFile)
		if err != nil {
			return nil, err
		}
		global = sections["*"]
		dedup := truthy(global[keyDedup])
		for name, opts := range sections {
			if name == "*" {
				continue
			}
			m, ok := models[name]
			if !ok {
				m = &Model{Name: name, Options: map[string]string{}}
				models[name] = m
			}
			m.Source = SourcePreset
			for k, v := range opts {
				m.Options[k] = v
			}
			if repo := opts["hf-repo"]; (dedup || truthy(opts[keyDedup])) && repo != "" {
				hideCacheEntry(models, repo)
			}
		}
	}
	for _, m := range models {
		for k, v := range global {
			if _, ok := m.Options[k]; !ok {
				m.Options[k] = v
			}
		}
	}
	return models, nil
}

// hideCacheEntry hides the cache entries a preset's hf-repo stands for (dedup-cache-models).
func hideCacheEntry(models map[string]*Model, repo string) {
	for name, m := range models {
		if m.Source == SourceCache && (name == repo || strings.HasPrefix(name, repo+":")) {
			m.Hidden = true
		}
	}
}

// scanModelsDir finds the models of a --models-dir: each .gguf file at its top is a model
// named after the file (without .gguf); each subfolder holding GGUF files is a model named
// after the folder, its model being the first file (a split model's first part) whose name
// does not start with mmproj, and its projector (--mmproj) the first that does.
func scanModelsDir(dir string) ([]*Model, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--models-dir: %w", err)
	}
	var out []*Model
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			if main := folderModel(p); main != "" {
				opts := map[string]string{"model": main}
				if proj := folderProjector(p); proj != "" {
					opts["mmproj"] = proj // as llama-server's router pairs them
				}
				out = append(out, &Model{Name: e.Name(), Source: SourceModelsDir, Options: opts})
			}
			continue
		}
		if name, ok := strings.CutSuffix(e.Name(), ".gguf"); ok && !strings.HasPrefix(e.Name(), "mmproj") {
			out = append(out, &Model{Name: name, Source: SourceModelsDir, Options: map[string]string{"model": p}})
		}
	}
	return out, nil
}

// folderModel is the model file of a model's subfolder, or "" when it has none.
func folderModel(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	sort.Strings(files)
	for _, f := range files {
		base := filepath.Base(f)
		if strings.HasPrefix(base, "mmproj") {
			continue
		}
		if strings.Contains(base, "-of-") && !strings.Contains(base, "-00001-of-") {
			continue
		}
		return f
	}
	return ""
}

// folderProjector is the projector of a model's subfolder (the first file whose name starts
// with mmproj), or "" when it has none.
func folderProjector(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "mmproj*.gguf"))
	sort.Strings(files)
	if len(files) == 0 {
		return ""
	}
	return files[0]
}

// ReadPreset reads a llama-server preset file: "version = 1", then sections ([*] for every
// model, [NAME] for one) of "key = value" lines whose keys are flag names (with or without
// leading dashes). Lines starting with ; or # are comments. Keys before any section are the
// file's own (version) and are not returned.
func ReadPreset(path string) (map[string]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--models-preset: %w", err)
	}
	defer f.Close()
	sections := map[string]map[string]string{}
	var cur map[string]string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == ';' || line[0] == '#' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			name, ok := strings.CutSuffix(line[1:], "]")
			name = strings.TrimSpace(name)
			if !ok || name == "" {
				return nil, fmt.Errorf("--models-preset %s:%d: bad section header %q", path, n, line)
			}
			if sections[name] == nil {
				sections[name] = map[string]string{}
			}
			cur = sections[name]
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("--models-preset %s:%d: expected key = value, got %q", path, n, line)
		}
		key = strings.TrimLeft(strings.TrimSpace(key), "-")
		value = strings.Trim(strings.TrimSpace(value), `"`)
		if cur == nil {
			if key == "version" && value != "1" {
				return nil, fmt.Errorf("--models-preset %s:%d: unsupported version %s (want 1)", path, n, value)
			}
			continue
		}
		cur[key] = value
	}
	return sections, sc.Err()
}
