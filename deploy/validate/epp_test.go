package validate

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestEndpointPicker: the EPP Deployment names the pool, uses only flags the EPP knows, mounts
// its config from the ConfigMap and has the RBAC it needs.
func TestEndpointPicker(t *testing.T) {
	docs := manifests(t)
	pool := thePool(t, docs)
	epp, _ := eppDeployment(t, docs)
	ns := kustomizeNamespace(t, docs)
	if len(epp.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("EPP pods have %d containers, want 1", len(epp.Spec.Template.Spec.Containers))
	}
	c := epp.Spec.Template.Spec.Containers[0]

	// Its image's tag is the inference extension version these manifests are checked against.
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/gateway-api-inference-extension (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod does not require sigs.k8s.io/gateway-api-inference-extension")
	}
	version := string(m[1])
	if want := eppImageRepo + ":" + version; c.Image != want {
		t.Errorf("EPP image %q, want %q (the version of sigs.k8s.io/gateway-api-inference-extension in go.mod)", c.Image, want)
	}

	flags := parseArgs(t, c.Args, func(n string) bool { return eppBoolFlags[n] })
	for _, f := range flags {
		if !EPPFlags[f.Name] {
			t.Errorf("--%s is not a flag of the EPP %s", f.Name, version)
		}
	}
	if v, _ := flagValue(flags, "pool-name"); v != pool.Name {
		t.Errorf("--pool-name %q, want the InferencePool %q", v, pool.Name)
	}
	if v, ok := flagValue(flags, "pool-group"); ok && v != inferenceGroup {
		t.Errorf("--pool-group %q, want %q", v, inferenceGroup)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if v, ok := flagValue(flags, "pool-namespace"); ok {
		if m := regexp.MustCompile(`^\$\((\w+)\)$`).FindStringSubmatch(v); m != nil {
			e, ok := env[m[1]]
			if !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
				t.Errorf("--pool-namespace %s: env %s is not the pod's metadata.namespace", v, m[1])
			}
		} else if v != ns {
			t.Errorf("--pool-namespace %q, want %q", v, ns)
		}
	}

	// --config-file is a key of a mounted ConfigMap that holds a valid config.
	file, ok := flagValue(flags, "config-file")
	if !ok {
		t.Fatal("EPP args: no --config-file")
	}
	var cm *corev1.ConfigMap
	for _, m := range c.VolumeMounts {
		dir := strings.TrimSuffix(m.MountPath, "/")
		if filepath.Dir(file) != dir {
			continue
		}
		for _, v := range epp.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cm = named[*corev1.ConfigMap](t, docs, "ConfigMap", v.ConfigMap.Name)
			}
		}
	}
	if cm == nil {
		t.Fatalf("--config-file %s is on no ConfigMap volume", file)
	}
	if _, ok := cm.Data[filepath.Base(file)]; !ok {
		t.Errorf("ConfigMap %s has no key %s", cm.Name, filepath.Base(file))
	}

	// Health probes on the gRPC health port.
	healthPort, _ := strconv.Atoi(eppFlagOr(flags, "grpc-health-port", "9003"))
	for name, p := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		if p == nil || p.GRPC == nil || int(p.GRPC.Port) != healthPort {
			t.Errorf("EPP %s: want gRPC on port %d", name, healthPort)
		}
	}
	if _, ok := containerPort(c, intstr.FromInt32(9002)); !ok {
		t.Error("EPP container does not declare port 9002")
	}

	// RBAC: its ServiceAccount may read pods and InferencePools in the namespace.
	sa := epp.Spec.Template.Spec.ServiceAccountName
	named[*corev1.ServiceAccount](t, docs, "ServiceAccount", sa)
	bindings, _ := objects[*rbacv1.RoleBinding](docs)
	granted := map[string]bool{}
	for _, b := range bindings {
		bound := false
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa {
				bound = true
				if s.Namespace != ns {
					t.Errorf("RoleBinding %s: ServiceAccount %s in namespace %q, want %q", b.Name, sa, s.Namespace, ns)
				}
			}
		}
		if !bound {
			continue
		}
		if b.RoleRef.Kind != "Role" || b.RoleRef.APIGroup != rbacv1.GroupName {
			t.Errorf("RoleBinding %s: roleRef %s/%s", b.Name, b.RoleRef.APIGroup, b.RoleRef.Kind)
			continue
		}
		role := named[*rbacv1.Role](t, docs, "Role", b.RoleRef.Name)
		for _, r := range role.Rules {
			if !slices.Contains(r.Verbs, "get") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					granted[g+"/"+res] = true
				}
			}
		}
	}
	for _, need := range []string{"/pods", inferenceGroup + "/inferencepools"} {
		if !granted[need] {
			t.Errorf("the EPP's ServiceAccount %s may not get, list and watch %s", sa, need)
		}
	}
}

func eppFlagOr(flags []Flag, name, def string) string {
	if v, ok := flagValue(flags, name); ok {
		return v
	}
	return def
}

// eppConfig is the EndpointPickerConfig the EPP reads, decoded.
func eppConfig(t *testing.T, docs []Doc) *MetricsExtractorParams {
	t.Helper()
	epp, _ := eppDeployment(t, docs)
	c := epp.Spec.Template.Spec.Containers[0]
	file, _ := flagValue(parseArgs(t, c.Args, func(n string) bool { return eppBoolFlags[n] }), "config-file")
	cms, _ := objects[*corev1.ConfigMap](docs)
	for _, cm := range cms {
		for _, v := range epp.Spec.Template.Spec.Volumes {
			if v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
				continue
			}
			text, ok := cm.Data[filepath.Base(file)]
			if !ok {
				continue
			}
			cfg, ex, err := DecodeEPPConfig([]byte(text))
			if err != nil {
				t.Fatalf("ConfigMap %s %s: %v", cm.Name, filepath.Base(file), err)
			}
			if cfg.Kind != eppConfigKind {
				t.Fatalf("kind %s", cfg.Kind)
			}
			return ex
		}
	}
	t.Fatal("no EPP config found")
	return nil
}

// TestEPPConfig: the EPP config parses and its engines read series the server writes.
func TestEPPConfig(t *testing.T) {
	docs := manifests(t)
	ex := eppConfig(t, docs)
	dep, c := modelServer(t, docs)

	// The pods' engine label names an engine the extractor knows, and the server writes that
	// engine's names: vLLM's under --metrics-compat vllm, its own otherwise.
	key := EngineLabelKey
	if ex != nil && ex.EngineLabelKey != "" {
		key = ex.EngineLabelKey
	}
	engine, labelled := dep.Spec.Template.Labels[key]
	if !labelled {
		engine = "vllm"
		if ex != nil && ex.DefaultEngine != "" {
			engine = ex.DefaultEngine
		}
	}
	ec, ok := ex.Engine(engine)
	if !ok {
		t.Fatalf("the model server pods' engine %q (label %s) is not one the EPP config knows", engine, key)
	}
	compat, _ := flagValue(parseArgs(t, c.Args, serverIsBool(t)), "metrics-compat")
	if strings.HasPrefix(ec.QueuedRequestsSpec, "vllm:") != (compat == "vllm") {
		t.Errorf("engine %q reads %s, but the server runs with --metrics-compat %q", engine, ec.QueuedRequestsSpec, compat)
	}

	// An engine entry for the server's own names, exactly those.
	native, ok := ex.Engine("wgpu-llama")
	if !ok {
		t.Fatal("the EPP config has no wgpu-llama engine (the server's own metric names)")
	}
	if native.QueuedRequestsSpec != nativeMetrics.QueuedRequestsSpec || native.RunningRequestsSpec != nativeMetrics.RunningRequestsSpec ||
		native.KVUsageSpec != nativeMetrics.KVUsageSpec {
		t.Errorf("engine wgpu-llama reads %+v, want the server's names %+v", native, nativeMetrics)
	}
}

// The EPP config has the scorers the pool is meant to be scheduled by.
func TestEPPConfigPlugins(t *testing.T) {
	docs := manifests(t)
	cm := named[*corev1.ConfigMap](t, docs, "ConfigMap", "wgpu-llama-epp")
	cfg, _, err := DecodeEPPConfig([]byte(cm.Data["epp-config.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	inProfile := map[string]bool{}
	for _, p := range cfg.SchedulingProfiles {
		for _, sp := range p.Plugins {
			inProfile[sp.PluginRef] = true
		}
	}
	for _, want := range []string{"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer", "lora-affinity-scorer", "max-score-picker"} {
		if !inProfile[want] {
			t.Errorf("no scheduling profile uses %s", want)
		}
	}
}

var metricNameRE = regexp.MustCompile(`[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]+|wgpu_llama_[a-zA-Z0-9_]+`)

// TestScaledObject: KEDA scales the model server on a query of series the server writes.
func TestScaledObject(t *testing.T) {
	docs := manifests(t)
	dep, _ := modelServer(t, docs)
	ns := kustomizeNamespace(t, docs)
	ex := eppConfig(t, docs)
	engine := dep.Spec.Template.Labels[EngineLabelKey]
	ec, _ := ex.Engine(engine)
	queue, _ := ParseMetricSpec(ec.QueuedRequestsSpec)

	sos, _ := objects[*ScaledObject](docs)
	if len(sos) != 1 {
		t.Fatalf("%d ScaledObjects, want 1", len(sos))
	}
	so := sos[0]
	ref := so.Spec.ScaleTargetRef
	if ref == nil || ref.Name != dep.Name || (ref.Kind != "" && ref.Kind != "Deployment") || (ref.APIVersion != "" && ref.APIVersion != "apps/v1") {
		t.Errorf("scaleTargetRef %+v, want the Deployment %s", ref, dep.Name)
	}
	if lo, hi := so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount; lo == nil || hi == nil || *lo < 1 || *hi < *lo {
		t.Errorf("minReplicaCount %v maxReplicaCount %v", lo, hi)
	}
	if len(so.Spec.Triggers) == 0 {
		t.Fatal("no triggers")
	}
	for _, tr := range so.Spec.Triggers {
		if tr.Type != "prometheus" {
			t.Errorf("trigger type %q, want prometheus", tr.Type)
			continue
		}
		for k := range tr.Metadata {
			if _, ok := PrometheusTriggerMetadata[k]; !ok {
				t.Errorf("prometheus trigger metadata %q is not a key KEDA's prometheus scaler reads", k)
			}
		}
		for k, required := range PrometheusTriggerMetadata {
			if required && tr.Metadata[k] == "" {
				t.Errorf("prometheus trigger metadata %q is missing", k)
			}
		}
		if th, err := strconv.ParseFloat(tr.Metadata["threshold"], 64); err != nil || th <= 0 {
			t.Errorf("threshold %q", tr.Metadata["threshold"])
		}
		// Per replica: the HPA divides the summed queue by the replica count.
		if tr.MetricType != "AverageValue" {
			t.Errorf("metricType %q, want AverageValue (the summed queue per replica)", tr.MetricType)
		}
		q := tr.Metadata["query"]
		if !strings.HasPrefix(strings.TrimSpace(q), "sum(") {
			t.Errorf("query %q does not sum over the replicas", q)
		}
		names := metricNameRE.FindAllString(q, -1)
		if queue == nil || !slices.Contains(names, queue.Name) {
			t.Errorf("query %q does not read the queue series %v of the pods' engine %q", q, queue, engine)
		}
		if m := regexp.MustCompile(`namespace="([^"]*)"`).FindStringSubmatch(q); m != nil && m[1] != ns {
			t.Errorf("query's namespace %q, want %q", m[1], ns)
		}
	}
}
