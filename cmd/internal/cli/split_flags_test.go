package cli

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestSplitFlags: llama.cpp's --device, --split-mode, --tensor-split and --main-gpu resolve
// into the engine's Device, Devices and TensorSplit, and bad values are refused saying why.
func TestSplitFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		device  int
		devices []int
		shares  []float64
	}{
		{nil, -1, nil, nil},
		{[]string{"--device", "1"}, 1, nil, nil},
		{[]string{"-dev", "0,1"}, -1, []int{0, 1}, nil},
		{[]string{"-dev", "0,0", "-ts", "1,3"}, -1, []int{0, 0}, []float64{1, 3}},
		{[]string{"-dev", "0,1", "--tensor-split", "3/1"}, -1, []int{0, 1}, []float64{3, 1}},
		{[]string{"-dev", "2,1", "-sm", "none", "-mg", "1"}, 1, nil, nil},
		{[]string{"-sm", "none", "--main-gpu", "2"}, 2, nil, nil},
	} {
		cfg, err := applySplit(t, tc.args)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if cfg.Device != tc.device || !slices.Equal(cfg.Devices, tc.devices) || !slices.Equal(cfg.TensorSplit, tc.shares) {
			t.Errorf("%v: device %d, devices %v, shares %v; want %d, %v, %v", tc.args, cfg.Device, cfg.Devices, cfg.TensorSplit, tc.device, tc.devices, tc.shares)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-dev", "0,x"}, "want adapter indices"},
		{[]string{"-dev", "0,1", "-sm", "row"}, "--split-mode row is not supported"},
		{[]string{"-sm", "rows"}, "want layer or none"},
		{[]string{"-dev", "0,1", "-ts", "1,2,3"}, "3 shares for 2 devices"},
		{[]string{"-dev", "0,1", "-ts", "1,-1"}, "non-negative"},
		{[]string{"-dev", "0,1", "-sm", "none", "-mg", "2"}, "--main-gpu 2: --device lists 2 adapters"},
		{[]string{"-dev", "0,-1"}, "name each adapter of a split"},
	} {
		if _, err := applySplit(t, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// applySplit parses args as the split flags and applies them to an engine configuration.
func applySplit(t *testing.T, args []string) (engine.Config, error) {
	t.Helper()
	fs := newFlagSet("test", "test", nil)
	var sf splitFlags
	sf.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var cfg engine.Config
	err := sf.apply(&cfg)
	return cfg, err
}

// TestDevicesPlan: `devices -m FILE --device A,A --tensor-split 1,1` lists where the model's
// layers would go, as the server would put them.
func TestDevicesPlan(t *testing.T) {
	requireGPU(t)
	idx := strconv.Itoa(gputest.AdapterIndex(t))
	var stdout, stderr bytes.Buffer
	path := shareddata.Path(t, "models", "stories260K.gguf")
	if err := run(context.Background(), []string{"devices", "-m", path, "--device", idx + "," + idx, "-ts", "1,1", "-c", "256"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	re := regexp.MustCompile(`(?m)^` + idx + ` .*  0-2 +false +\d+ MiB .*\n` + idx + ` .*  3-4 +true +\d+ MiB`)
	if !re.MatchString(stdout.String()) {
		t.Errorf("devices plan:\n%s", stdout.String())
	}
}
