package server

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestPropsShowSplit: /props lists the devices of a split model with their layers (our
// extension; a one-device server's /props has no devices, as llama-server's).
func TestPropsShowSplit(t *testing.T) {
	idx, name := gputest.AdapterIndex(t), gputest.Device(t).Info.Name
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 256,
		Devices: []int{idx, idx}, TensorSplit: []float64{1, 3}})
	srv := New(Config{}, testLogger())
	srv.SetBackend(e)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer srv.Close()
	_, _, body := do(t, "GET", ts.URL+"/props", "", nil)
	var props struct {
		Devices []struct {
			Index      int    `json:"index"`
			Name       string `json:"name"`
			FirstLayer int    `json:"first_layer"`
			NLayers    int    `json:"n_layers"`
			Output     bool   `json:"output"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(body), &props); err != nil {
		t.Fatal(err)
	}
	d := props.Devices
	// 5 layers at 1:3, the output counted as a sixth as llama.cpp counts it: layers 0 and 1
	// on the first device.
	if len(d) != 2 || d[0].Index != idx || d[0].Name != name || d[0].FirstLayer != 0 || d[0].NLayers != 2 || d[0].Output ||
		d[1].FirstLayer != 2 || d[1].NLayers != 3 || !d[1].Output {
		t.Errorf("/props devices %+v", d)
	}
}
