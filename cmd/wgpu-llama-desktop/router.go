package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/wgpu-llama/wgpu-llama/debugview"
)

// routerWatch polls a router's GET /models once a second for the router frame.
type routerWatch struct {
	models  atomic.Pointer[[]debugview.RouterModel] // nil before the first answer
	started bool                                    // run was started (the main thread's)
}

// run polls url until ctx ends, calling changed after each answer.
func (w *routerWatch) run(ctx context.Context, url string, changed func()) {
	client := http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if models, err := fetchModels(ctx, &client, url); err == nil {
			w.models.Store(&models)
			changed()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// fetchModels reads a router's model list.
func fetchModels(ctx context.Context, client *http.Client, url string) ([]debugview.RouterModel, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/models", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			ID     string `json:"id"`
			Source string `json:"source"`
			Status struct {
				Value    string   `json:"value"`
				Progress *float64 `json:"progress"`
				Failed   bool     `json:"failed"`
			} `json:"status"`
		} `json:"data"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 16<<20)).Decode(&body); err != nil {
		return nil, err
	}
	out := make([]debugview.RouterModel, len(body.Data))
	for i, m := range body.Data {
		out[i] = debugview.RouterModel{ID: m.ID, Status: m.Status.Value, Progress: m.Status.Progress, Source: m.Source, Failed: m.Status.Failed}
	}
	return out, nil
}
