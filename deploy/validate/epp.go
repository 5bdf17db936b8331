package validate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	configapi "sigs.k8s.io/gateway-api-inference-extension/apix/config/v1alpha1"
)

// What the Endpoint Picker of the inference extension knows, at the version of
// sigs.k8s.io/gateway-api-inference-extension in go.mod (v1.5.0), which is also the EPP image's
// tag in deploy/kubernetes/epp.yaml (a test keeps the two equal). Read from that release's
// pkg/epp/server/options.go, pkg/common/observability/logging/options.go, cmd/epp/runner/runner.go
// (registerInTreePlugins) and the plugins' factories.

// EPPFlags are the EPP's command-line flags.
var EPPFlags = map[string]bool{
	"grpc-port": true, "ha-enable-leader-election": true, "pool-group": true, "pool-namespace": true,
	"pool-name": true, "endpoint-selector": true, "endpoint-target-ports": true,
	"disable-endpoint-subset-filter": true, "model-server-metrics-scheme": true,
	"model-server-metrics-path": true, "model-server-metrics-port": true,
	"model-server-metrics-https-insecure-skip-verify": true, "refresh-metrics-interval": true,
	"refresh-prometheus-metrics-interval": true, "metrics-staleness-threshold": true,
	"total-queued-requests-metric": true, "total-running-requests-metric": true,
	"kv-cache-usage-percentage-metric": true, "lora-info-metric": true, "cache-info-metric": true,
	"tracing": true, "health-checking": true, "metrics-port": true, "grpc-health-port": true,
	"enable-pprof": true, "cert-path": true, "enable-cert-reload": true, "secure-serving": true,
	"metrics-endpoint-auth": true, "config-file": true, "config-text": true,
	// logging: -v and controller-runtime's zap flags
	"v": true, "zap-devel": true, "zap-encoder": true, "zap-log-level": true,
	"zap-stacktrace-level": true, "zap-time-encoding": true,
}

// EPPFeatureGates are the feature gates the EPP registers.
var EPPFeatureGates = map[string]bool{"dataLayer": true, "enableLegacyMetrics": true, "flowControl": true}

// EPPPluginTypes are the plugin types the EPP registers.
var EPPPluginTypes = map[string]bool{
	"prefix-cache-scorer": true, "max-score-picker": true, "random-picker": true,
	"weighted-random-picker": true, "single-profile-handler": true,
	"kv-cache-utilization-scorer": true, "queue-scorer": true, "running-requests-size-scorer": true,
	"lora-affinity-scorer": true, "token-load-scorer": true,
	"global-strict-fairness-policy": true, "round-robin-fairness-policy": true,
	"fcfs-ordering-policy": true, "edf-ordering-policy": true, "slo-deadline-ordering-policy": true,
	"static-usage-limit-policy": true, "approx-prefix-cache-producer": true,
	"predicted-latency-scorer": true, "predicted-latency-producer": true, "latency-slo-admitter": true,
	"prefix-cache-affinity-filter": true, "slo-headroom-tier-filter": true, "latency-scorer": true,
	"inflight-load-producer": true, "header-based-testing-filter": true,
	"destination-endpoint-served-verifier": true, "metrics-data-source": true,
	"core-metrics-extractor": true, "k8s-notification-source": true,
	"endpoint-notification-source": true, "request-attribute-reporter": true, "openai-parser": true,
	"vllmgrpc-parser": true, "passthrough-parser": true, "concurrency-detector": true,
	"utilization-detector": true,
}

// Roles of some plugin types in a scheduling profile.
var (
	EPPScorers = map[string]bool{
		"queue-scorer": true, "kv-cache-utilization-scorer": true, "prefix-cache-scorer": true,
		"lora-affinity-scorer": true, "running-requests-size-scorer": true, "token-load-scorer": true,
		"latency-scorer": true, "predicted-latency-scorer": true,
	}
	EPPPickers = map[string]bool{"max-score-picker": true, "random-picker": true, "weighted-random-picker": true}
)

// The parameters of the plugins whose factories read any (the EPP decodes them leniently, so a
// misspelt key would be ignored there: here it is an error).
type (
	metricsDataSourceParams struct {
		Scheme             string `json:"scheme"`
		Path               string `json:"path"`
		InsecureSkipVerify bool   `json:"insecureSkipVerify"`
	}
	pickerParams struct {
		MaxNumOfEndpoints int `json:"maxNumOfEndpoints"`
	}
	// EngineConfig is one engineConfigs entry of the core-metrics-extractor: which Prometheus
	// series of a model server mean what.
	EngineConfig struct {
		Name                    string `json:"name"`
		QueuedRequestsSpec      string `json:"queuedRequestsSpec"`
		RunningRequestsSpec     string `json:"runningRequestsSpec"`
		KVUsageSpec             string `json:"kvUsageSpec"`
		LoRASpec                string `json:"loraSpec"`
		CacheInfoSpec           string `json:"cacheInfoSpec"`
		CacheBlockSizeLabelName string `json:"cacheBlockSizeLabelName,omitempty"`
		CacheNumBlocksLabelName string `json:"cacheNumBlocksLabelName,omitempty"`
		CacheBlockSizeSpec      string `json:"cacheBlockSizeSpec,omitempty"`
		CacheNumBlocksSpec      string `json:"cacheNumBlocksSpec,omitempty"`
	}
	// MetricsExtractorParams are the core-metrics-extractor's parameters.
	MetricsExtractorParams struct {
		EngineLabelKey string         `json:"engineLabelKey"`
		DefaultEngine  string         `json:"defaultEngine"`
		EngineConfigs  []EngineConfig `json:"engineConfigs"`
	}
)

// EPPBuiltinEngines are the engines whose metric names the core-metrics-extractor knows without
// engineConfigs; vllm is the default engine.
var EPPBuiltinEngines = map[string]EngineConfig{
	"vllm": {Name: "vllm", QueuedRequestsSpec: "vllm:num_requests_waiting",
		RunningRequestsSpec: "vllm:num_requests_running", KVUsageSpec: "vllm:kv_cache_usage_perc",
		LoRASpec: "vllm:lora_requests_info", CacheInfoSpec: "vllm:cache_config_info"},
	"sglang": {Name: "sglang"}, "trtllm-serve": {Name: "trtllm-serve"},
	"triton-tensorrt-llm": {Name: "triton-tensorrt-llm"},
}

// EngineLabelKey is the pod label the extractor reads the engine from by default.
const EngineLabelKey = "inference.networking.k8s.io/engine-type"

// DecodeEPPConfig decodes an EndpointPickerConfig as the EPP does (a scheme with the config API
// and a strict codec: unknown fields are errors), then checks what the EPP's loader checks before
// it builds the plugins: known feature gates and plugin types, unique plugin names, and
// scheduling profiles, the data layer, the parser and the saturation detector naming plugins
// that are defined; and, more strictly than the EPP, the parameters of the plugins above.
func DecodeEPPConfig(text []byte) (*configapi.EndpointPickerConfig, *MetricsExtractorParams, error) {
	scheme := runtime.NewScheme()
	if err := configapi.Install(scheme); err != nil {
		return nil, nil, err
	}
	cfg := &configapi.EndpointPickerConfig{}
	codecs := serializer.NewCodecFactory(scheme, serializer.EnableStrict)
	if err := runtime.DecodeInto(codecs.UniversalDecoder(), text, cfg); err != nil {
		return nil, nil, fmt.Errorf("EndpointPickerConfig: %w", err)
	}
	if cfg.APIVersion != configapi.GroupVersion.String() || cfg.Kind != "EndpointPickerConfig" {
		return nil, nil, fmt.Errorf("EndpointPickerConfig: apiVersion %q kind %q", cfg.APIVersion, cfg.Kind)
	}
	for _, g := range cfg.FeatureGates {
		if !EPPFeatureGates[g] {
			return nil, nil, fmt.Errorf("feature gate %q is not one the EPP knows", g)
		}
	}
	defined := map[string]string{} // name -> type
	var extractor *MetricsExtractorParams
	for _, p := range cfg.Plugins {
		if p.Type == "" {
			return nil, nil, fmt.Errorf("plugin %q has no type", p.Name)
		}
		if !EPPPluginTypes[p.Type] {
			return nil, nil, fmt.Errorf("plugin type %q is not one the EPP registers", p.Type)
		}
		name := p.Name
		if name == "" {
			name = p.Type
		}
		if _, dup := defined[name]; dup {
			return nil, nil, fmt.Errorf("plugin name %q is defined twice", name)
		}
		defined[name] = p.Type
		var err error
		switch p.Type {
		case "metrics-data-source":
			err = decodeParams(p.Parameters, &metricsDataSourceParams{})
		case "max-score-picker", "random-picker", "weighted-random-picker":
			err = decodeParams(p.Parameters, &pickerParams{})
		case "core-metrics-extractor":
			extractor = &MetricsExtractorParams{}
			err = decodeParams(p.Parameters, extractor)
		case "queue-scorer", "kv-cache-utilization-scorer", "lora-affinity-scorer", "single-profile-handler":
			if len(p.Parameters) > 0 && string(p.Parameters) != "null" {
				err = fmt.Errorf("takes no parameters")
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("plugin %q (%s) parameters: %w", name, p.Type, err)
		}
	}
	ref := func(where, name string) error {
		if _, ok := defined[name]; !ok {
			return fmt.Errorf("%s names plugin %q, which plugins does not define", where, name)
		}
		return nil
	}
	profiles := map[string]bool{}
	for i, prof := range cfg.SchedulingProfiles {
		if prof.Name == "" || profiles[prof.Name] {
			return nil, nil, fmt.Errorf("schedulingProfiles[%d]: missing or repeated name %q", i, prof.Name)
		}
		profiles[prof.Name] = true
		for _, sp := range prof.Plugins {
			if err := ref("schedulingProfiles["+prof.Name+"]", sp.PluginRef); err != nil {
				return nil, nil, err
			}
			if sp.Weight != nil && (*sp.Weight <= 0 || !EPPScorers[defined[sp.PluginRef]]) {
				return nil, nil, fmt.Errorf("schedulingProfiles[%s]: weight %v on %q (weights are positive, for scorers)", prof.Name, *sp.Weight, sp.PluginRef)
			}
		}
	}
	if cfg.DataLayer != nil {
		for _, src := range cfg.DataLayer.Sources {
			if err := ref("dataLayer.sources", src.PluginRef); err != nil {
				return nil, nil, err
			}
			for _, ex := range src.Extractors {
				if err := ref("dataLayer.sources["+src.PluginRef+"].extractors", ex.PluginRef); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	if cfg.Parser != nil {
		if err := ref("parser", cfg.Parser.PluginRef); err != nil {
			return nil, nil, err
		}
	}
	if cfg.SaturationDetector != nil {
		if err := ref("saturationDetector", cfg.SaturationDetector.PluginRef); err != nil {
			return nil, nil, err
		}
	}
	if extractor != nil {
		for _, ec := range extractor.EngineConfigs {
			if ec.Name == "" || ec.Name == "default" {
				return nil, nil, fmt.Errorf("core-metrics-extractor: engine name %q", ec.Name)
			}
			for _, spec := range []string{ec.QueuedRequestsSpec, ec.RunningRequestsSpec, ec.KVUsageSpec,
				ec.LoRASpec, ec.CacheInfoSpec, ec.CacheBlockSizeSpec, ec.CacheNumBlocksSpec} {
				if _, err := ParseMetricSpec(spec); err != nil {
					return nil, nil, fmt.Errorf("core-metrics-extractor engine %q: %w", ec.Name, err)
				}
			}
		}
	}
	return cfg, extractor, nil
}

func decodeParams(raw json.RawMessage, into any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return UnmarshalStrict(raw, into)
}

// Engine returns the metric names the extractor uses for pods labelled engine: an
// engineConfigs entry, else a built-in engine; ok is false for an engine it does not know.
func (p *MetricsExtractorParams) Engine(engine string) (EngineConfig, bool) {
	if p != nil {
		for _, ec := range p.EngineConfigs {
			if ec.Name == engine {
				return ec, true
			}
		}
	}
	ec, ok := EPPBuiltinEngines[engine]
	return ec, ok
}

// MetricSpec is a metric specification of the extractor: a series name and label values.
type MetricSpec struct {
	Name   string
	Labels map[string]string
}

var (
	metricSpecRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$`)
	labelRE      = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"?([^",{}]*)"?\s*$`)
)

// ParseMetricSpec parses a spec as the extractor does: name or name{label=value,...}, the values
// quoted or not; "" is no spec (nil).
func ParseMetricSpec(spec string) (*MetricSpec, error) {
	if spec == "" {
		return nil, nil
	}
	m := metricSpecRE.FindStringSubmatch(strings.TrimSpace(spec))
	if m == nil {
		return nil, fmt.Errorf("metric spec %q is not name or name{label=value,...}", spec)
	}
	ms := &MetricSpec{Name: m[1], Labels: map[string]string{}}
	if strings.TrimSpace(m[2]) != "" {
		for _, kv := range strings.Split(m[2], ",") {
			l := labelRE.FindStringSubmatch(kv)
			if l == nil {
				return nil, fmt.Errorf("metric spec %q: label matcher %q", spec, kv)
			}
			ms.Labels[l[1]] = l[2]
		}
	}
	return ms, nil
}
