package router

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/wgpu-llama/wgpu-llama/internal/apijson"
)

// metricsTimeout bounds the scrape of one child: a child that does not answer in time is left
// out of that scrape rather than holding up the gateway that asked.
const metricsTimeout = 2 * time.Second

// metrics answers GET /metrics: with ?model= the model's own (proxied), else every loaded
// model's series, each labelled model="NAME", followed by the router's count of models by
// status. A gateway scraping a router thus needs no model name, and the series of several
// models never collide.
func (r *Router) metrics(w http.ResponseWriter, req *http.Request) {
	if req.URL.Query().Get("model") != "" {
		r.proxyByModel(w, req)
		return
	}
	if !r.cfg.Metrics {
		apijson.Error(w, http.StatusNotImplemented, "not_supported_error", "This server does not support metrics endpoint. Start it with `--metrics`")
		return
	}
	type target struct {
		name string
		port int
	}
	var targets []target
	byStatus := map[string]int{}
	r.mu.Lock()
	for name, in := range r.models {
		byStatus[in.status]++
		if in.status == StatusLoaded && in.child != nil {
			targets = append(targets, target{name, in.child.port})
		}
	}
	r.mu.Unlock()

	scraped := make([]map[string]*dto.MetricFamily, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scraped[i] = scrapeChild(req.Context(), t.port)
		}()
	}
	wg.Wait()

	merged := map[string]*dto.MetricFamily{}
	for i, families := range scraped {
		for name, f := range families {
			for _, m := range f.Metric {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String("model"), Value: proto.String(targets[i].name)})
			}
			if have, ok := merged[name]; !ok {
				merged[name] = f
			} else if have.GetType() == f.GetType() {
				have.Metric = append(have.Metric, f.Metric...)
			}
		}
	}
	own := &dto.MetricFamily{Name: proto.String("wgpu_llama_router_models"), Help: proto.String("Models of the router's catalog by status"), Type: dto.MetricType_GAUGE.Enum()}
	for _, st := range []string{StatusLoaded, StatusLoading, StatusSleeping, StatusUnloaded, StatusFailed, StatusDownloading} {
		own.Metric = append(own.Metric, &dto.Metric{
			Label: []*dto.LabelPair{{Name: proto.String("status"), Value: proto.String(st)}},
			Gauge: &dto.Gauge{Value: proto.Float64(float64(byStatus[st]))},
		})
	}
	merged[own.GetName()] = own

	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.WriteHeader(http.StatusOK)
	names := make([]string, 0, len(merged))
	for name := range merged {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if _, err := expfmt.MetricFamilyToText(w, merged[name]); err != nil {
			return // the client left
		}
	}
}

// scrapeChild reads a child's /metrics; nil when it does not answer in time or answers
// something else than metrics (a child started without --metrics answers 501).
func scrapeChild(ctx context.Context, port int) map[string]*dto.MetricFamily {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := proxyClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	return families
}
