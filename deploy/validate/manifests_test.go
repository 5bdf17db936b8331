package validate

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The inference extension's API groups and the EPP image, whose tag is the module's version.
const (
	inferenceGroup = "inference.networking.k8s.io"
	eppImageRepo   = "registry.k8s.io/gateway-api-inference-extension/epp"
	eppConfigKind  = "EndpointPickerConfig"
)

// The model server's own metric names (without --metrics-compat), which the EPP config's
// wgpu-llama engine reads.
var nativeMetrics = EngineConfig{
	QueuedRequestsSpec:  "llamacpp:requests_deferred",
	RunningRequestsSpec: "llamacpp:requests_processing",
	KVUsageSpec:         "wgpu_llama_kv_cache_usage_ratio",
}

func TestManifestsDecodeStrictly(t *testing.T) {
	docs, errs := LoadDir(kubeDir(t))
	for _, err := range errs {
		t.Error(err)
	}
	kinds := map[string]int{}
	for _, d := range docs {
		kinds[d.Kind]++
		if d.Name == "" && d.Kind != "Kustomization" {
			t.Errorf("%s has no metadata.name", d)
		}
	}
	t.Logf("decoded %d documents: %v", len(docs), kinds)
	for kind, least := range map[string]int{"Deployment": 2, "Service": 2, "InferencePool": 1, "HTTPRoute": 1,
		"Gateway": 1, "ConfigMap": 1, "ServiceAccount": 1, "Role": 1, "RoleBinding": 1,
		"PersistentVolumeClaim": 1, "ScaledObject": 1, "Kustomization": 1} {
		if kinds[kind] < least {
			t.Errorf("%d %s documents, want at least %d", kinds[kind], kind, least)
		}
	}
}

// Misspelt or mistyped fields must fail to decode: the check above is only worth something if
// they do.
func TestBrokenManifestsFail(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"Deployment replica", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  replica: 2
  selector: {matchLabels: {a: b}}
  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}
`, `unknown field "spec.replica"`},
		{"container imagePulPolicy", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  selector: {matchLabels: {a: b}}
  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i, imagePulPolicy: Always}]}}
`, "unknown field"},
		{"replicas of the wrong type", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec: {replicas: two}
`, "cannot unmarshal"},
		{"Service targetport", `
apiVersion: v1
kind: Service
metadata: {name: x}
spec: {ports: [{port: 80, targetport: 8080}]}
`, "unknown field"},
		{"ConfigMap date", `
apiVersion: v1
kind: ConfigMap
metadata: {name: x}
date: {a: b}
`, "unknown field"},
		{"InferencePool endpointPickerRef prot", `
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: x}
spec:
  selector: {matchLabels: {a: b}}
  targetPorts: [{number: 8080}]
  endpointPickerRef: {name: epp, prot: {number: 9002}}
`, "unknown field"},
		{"InferencePool targetPort", `
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: x}
spec:
  selector: {matchLabels: {a: b}}
  targetPort: [{number: 8080}]
`, "unknown field"},
		{"HTTPRoute backendRef", `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: x}
spec:
  rules: [{backendRef: [{group: inference.networking.k8s.io, kind: InferencePool, name: p}]}]
`, "unknown field"},
		{"Role verb", `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: x}
rules: [{apiGroups: [""], resources: [pods], verb: [get]}]
`, "unknown field"},
		{"ScaledObject minReplicas", `
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: x}
spec:
  scaleTargetRef: {name: d}
  minReplicas: 1
  triggers: [{type: prometheus, metadata: {query: q}}]
`, "unknown field"},
		{"ScaledObject trigger metaData", `
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: x}
spec:
  scaleTargetRef: {name: d}
  triggers: [{type: prometheus, metaData: {query: q}}]
`, "unknown field"},
		{"Kustomization resource", `
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resource: [a.yaml]
`, "unknown field"},
		{"a field given twice", `
apiVersion: v1
kind: Service
metadata: {name: x}
metadata: {name: y}
`, `"metadata" already set`},
		{"an unknown kind", `
apiVersion: apps/v1
kind: Deploymint
metadata: {name: x}
`, "not a type this check knows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeStrict([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeStrict = %v, want an error with %q", err, tc.want)
			}
		})
	}

	// The real model server manifest with one field misspelt fails too.
	data, err := os.ReadFile(filepath.Join(kubeDir(t), "model-server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(data), "readinessProbe:", "readynessProbe:", 1)
	if broken == string(data) {
		t.Fatal("model-server.yaml has no readinessProbe")
	}
	raws, err := SplitDocuments([]byte(broken))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeStrict(raws[0]); err == nil || !strings.Contains(err.Error(), "readynessProbe") {
		t.Errorf("model-server.yaml with readynessProbe decoded: %v", err)
	}

	// And the EPP's configuration: a misspelt field, an unknown plugin type, a profile naming
	// an undefined plugin, a misspelt extractor parameter, a bad metric spec.
	cm := named[*corev1.ConfigMap](t, manifests(t), "ConfigMap", "wgpu-llama-epp")
	cfg := cm.Data["epp-config.yaml"]
	for _, tc := range []struct{ from, to, want string }{
		{"schedulingProfiles:", "schedulingProfile:", "unknown field"},
		{"- type: queue-scorer", "- type: queue-scorrer", "not one the EPP registers"},
		{"- pluginRef: lora-affinity-scorer", "- pluginRef: lora-affinity", "does not define"},
		{"kvUsageSpec:", "kvUsageSpecs:", "unknown field"},
		{"kvUsageSpec: wgpu_llama_kv_cache_usage_ratio", "kvUsageSpec: wgpu-llama kv", "metric spec"},
	} {
		bad := strings.Replace(cfg, tc.from, tc.to, 1)
		if bad == cfg {
			t.Errorf("epp-config.yaml has no %q", tc.from)
			continue
		}
		if _, _, err := DecodeEPPConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("EPP config with %q for %q: %v, want an error with %q", tc.to, tc.from, err, tc.want)
		}
	}
}

// Every kustomization builds (kustomize's own library, as kubectl apply -k does), lists every
// manifest of its directory, and puts everything in its namespace.
func TestKustomizations(t *testing.T) {
	docs := manifests(t)
	dir := kubeDir(t)
	kusts, where := objects[*kustomizetypes.Kustomization](docs)
	namespaces := map[string]bool{}
	for i, k := range kusts {
		kdir := filepath.Join(dir, filepath.Dir(where[i].File))
		t.Run(filepath.ToSlash(filepath.Dir(where[i].File)), func(t *testing.T) {
			if k.Namespace == "" {
				t.Error("kustomization sets no namespace")
			}
			namespaces[k.Namespace] = true
			listed := map[string]bool{}
			for _, r := range k.Resources {
				if _, err := os.Stat(filepath.Join(kdir, r)); err != nil {
					t.Errorf("resource %s: %v", r, err)
				}
				listed[filepath.Clean(r)] = true
			}
			entries, _ := os.ReadDir(kdir)
			for _, e := range entries {
				if n := e.Name(); !e.IsDir() && n != "kustomization.yaml" && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) && !listed[n] {
					t.Errorf("%s is not listed in the kustomization's resources", n)
				}
			}
			res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), kdir)
			if err != nil {
				t.Fatalf("kustomize build: %v", err)
			}
			out, err := res.AsYaml()
			if err != nil {
				t.Fatal(err)
			}
			raws, err := SplitDocuments(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, raw := range raws {
				d, err := DecodeStrict(raw)
				if err != nil {
					t.Errorf("built: %v", err)
					continue
				}
				if d.Kind == "Namespace" {
					if d.Name != k.Namespace {
						t.Errorf("Namespace %q, kustomization namespace %q", d.Name, k.Namespace)
					}
					continue
				}
				if ns := d.Obj.(interface{ GetNamespace() string }).GetNamespace(); ns != k.Namespace {
					t.Errorf("built %s %s in namespace %q, want %q", d.Kind, d.Name, ns, k.Namespace)
				}
				if dep, ok := d.Obj.(*appsv1.Deployment); ok {
					for _, c := range dep.Spec.Template.Spec.Containers {
						if !strings.Contains(c.Image, ":") || strings.HasSuffix(c.Image, ":latest") {
							t.Errorf("built Deployment %s: image %q has no pinned tag", d.Name, c.Image)
						}
					}
				}
				if rb, ok := d.Obj.(*rbacv1.RoleBinding); ok {
					for _, s := range rb.Subjects {
						if s.Kind == rbacv1.ServiceAccountKind && s.Namespace != k.Namespace {
							t.Errorf("built RoleBinding %s: subject %s in namespace %q", d.Name, s.Name, s.Namespace)
						}
					}
				}
			}
			t.Logf("%d objects", len(raws))
		})
	}
	if len(namespaces) > 1 {
		t.Errorf("the kustomizations use different namespaces: %v", namespaces)
	}
}

func kustomizeNamespace(t *testing.T, docs []Doc) string {
	t.Helper()
	kusts, _ := objects[*kustomizetypes.Kustomization](docs)
	if len(kusts) == 0 {
		t.Fatal("no kustomization.yaml")
	}
	return kusts[0].Namespace
}

// thePool is the one InferencePool; modelServer is the Deployment whose pods it selects.
func thePool(t *testing.T, docs []Doc) *inferencev1.InferencePool {
	t.Helper()
	pools, _ := objects[*inferencev1.InferencePool](docs)
	if len(pools) != 1 {
		t.Fatalf("%d InferencePools, want 1", len(pools))
	}
	return pools[0]
}

func poolSelector(p *inferencev1.InferencePool) map[string]string {
	sel := map[string]string{}
	for k, v := range p.Spec.Selector.MatchLabels {
		sel[string(k)] = string(v)
	}
	return sel
}

func modelServer(t *testing.T, docs []Doc) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	deps := deploymentsSelected(docs, poolSelector(thePool(t, docs)))
	if len(deps) != 1 {
		t.Fatalf("the InferencePool's selector picks the pods of %d Deployments, want 1", len(deps))
	}
	if n := len(deps[0].Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("model server pods have %d containers, want 1", n)
	}
	return deps[0], deps[0].Spec.Template.Spec.Containers[0]
}

func eppDeployment(t *testing.T, docs []Doc) (*appsv1.Deployment, *corev1.Service) {
	t.Helper()
	ref := thePool(t, docs).Spec.EndpointPickerRef
	svc := named[*corev1.Service](t, docs, "Service (the InferencePool's endpointPickerRef)", string(ref.Name))
	deps := deploymentsSelected(docs, svc.Spec.Selector)
	if len(deps) != 1 {
		t.Fatalf("EPP Service %s selects the pods of %d Deployments, want 1", svc.Name, len(deps))
	}
	return deps[0], svc
}

func servingPort(t *testing.T, c corev1.Container) int32 {
	t.Helper()
	p, ok := containerPort(c, intstr.FromString("http"))
	if !ok {
		t.Fatalf("container %s has no port named http", c.Name)
	}
	return p
}

func TestModelServer(t *testing.T) {
	docs := manifests(t)
	dep, c := modelServer(t, docs)
	port := servingPort(t, c)

	all, _ := objects[*appsv1.Deployment](docs)
	for _, d := range all {
		if d.Spec.Selector == nil || !matches(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("Deployment %s: selector does not match its pod labels", d.Name)
		}
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Errorf("Deployment %s: replicas %v, want at least 2 behind the gateway", dep.Name, dep.Spec.Replicas)
	}

	flags := parseArgs(t, c.Args, serverIsBool(t))
	want := map[string]string{"host": "0.0.0.0", "port": strconv.Itoa(int(port)), "metrics-compat": "vllm", "parallel": "4", "metrics": ""}
	for name, v := range want {
		if got, ok := flagValue(flags, name); !ok || got != v {
			t.Errorf("args: --%s %q (given: %v), want %q", name, got, ok, v)
		}
	}
	model, ok := flagValue(flags, "m", "model")
	if !ok {
		t.Fatal("args: no -m")
	}

	// The model comes from a PersistentVolumeClaim, mounted read-only.
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if strings.HasPrefix(model, strings.TrimSuffix(m.MountPath, "/")+"/") {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil {
		t.Fatalf("-m %s is on no volume mount", model)
	}
	if !mount.ReadOnly {
		t.Errorf("volume mount %s is not readOnly", mount.Name)
	}
	var vol *corev1.Volume
	for i, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == mount.Name {
			vol = &dep.Spec.Template.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.PersistentVolumeClaim == nil {
		t.Fatalf("volume %s is not a PersistentVolumeClaim", mount.Name)
	}
	if !vol.PersistentVolumeClaim.ReadOnly {
		t.Errorf("volume %s: persistentVolumeClaim.readOnly is not set", vol.Name)
	}
	pvc := named[*corev1.PersistentVolumeClaim](t, docs, "PersistentVolumeClaim", vol.PersistentVolumeClaim.ClaimName)
	if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadOnlyMany) && !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("PersistentVolumeClaim %s: access modes %v: replicas on several nodes need ReadOnlyMany or ReadWriteMany", pvc.Name, pvc.Spec.AccessModes)
	}

	// Probes: GET /health on the serving port; liveness waits for the model to load.
	for name, p := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: none, or not httpGet", name)
			continue
		}
		if p.HTTPGet.Path != "/health" {
			t.Errorf("%s: path %q, want /health", name, p.HTTPGet.Path)
		}
		if got, ok := containerPort(c, p.HTTPGet.Port); !ok || got != port {
			t.Errorf("%s: port %s is not the serving port %d", name, p.HTTPGet.Port.String(), port)
		}
	}
	if p := c.LivenessProbe; p != nil && c.StartupProbe == nil && p.InitialDelaySeconds < 120 {
		t.Errorf("livenessProbe: initialDelaySeconds %d: loading a model takes minutes (or add a startupProbe)", p.InitialDelaySeconds)
	}

	if q, ok := c.Resources.Limits["nvidia.com/gpu"]; !ok || q.Value() != 1 {
		t.Errorf("resources.limits nvidia.com/gpu = %v, want 1", c.Resources.Limits["nvidia.com/gpu"])
	}

	// The Service picks exactly these pods, on the serving port.
	svcs, _ := objects[*corev1.Service](docs)
	found := false
	for _, s := range svcs {
		picked := deploymentsSelected(docs, s.Spec.Selector)
		if !slices.Contains(picked, dep) {
			continue
		}
		found = true
		if len(picked) != 1 {
			t.Errorf("Service %s selects the pods of %d Deployments", s.Name, len(picked))
		}
		for _, sp := range s.Spec.Ports {
			if got, ok := containerPort(c, sp.TargetPort); !ok || got != port || sp.Port != port {
				t.Errorf("Service %s port %d -> %s, want %d -> the serving port %d", s.Name, sp.Port, sp.TargetPort.String(), port, port)
			}
		}
	}
	if !found {
		t.Error("no Service selects the model server's pods")
	}
}

// The flags of the model server's args are flags of wgpu-llama (its --help).
func TestModelServerFlags(t *testing.T) {
	docs := manifests(t)
	_, c := modelServer(t, docs)
	known := serverFlags(t)
	flags := parseArgs(t, c.Args, serverIsBool(t))
	for _, f := range flags {
		if _, ok := known[f.Name]; ok {
			continue
		}
		if PendingServerFlags[f.Name] {
			t.Logf("--%s is not in wgpu-llama --help yet (accepted: being added)", f.Name)
			continue
		}
		t.Errorf("--%s is not a flag of wgpu-llama (--help)", f.Name)
	}
}

func TestInferencePoolAndRoute(t *testing.T) {
	docs := manifests(t)
	pool := thePool(t, docs)
	_, c := modelServer(t, docs)
	port := servingPort(t, c)

	if len(pool.Spec.TargetPorts) != 1 || int32(pool.Spec.TargetPorts[0].Number) != port {
		t.Errorf("InferencePool targetPorts %v, want [%d] (the model server's port)", pool.Spec.TargetPorts, port)
	}
	ref := pool.Spec.EndpointPickerRef
	if (ref.Kind != "" && ref.Kind != "Service") || (ref.Group != nil && *ref.Group != "") {
		t.Errorf("endpointPickerRef: group %v kind %q, want a core Service", ref.Group, ref.Kind)
	}
	if ref.FailureMode != inferencev1.EndpointPickerFailOpen && ref.FailureMode != inferencev1.EndpointPickerFailClose {
		t.Errorf("endpointPickerRef.failureMode %q", ref.FailureMode)
	}
	epp, svc := eppDeployment(t, docs)
	if matches(poolSelector(pool), epp.Spec.Template.Labels) {
		t.Error("the InferencePool's selector also picks the EPP's pods")
	}
	if ref.Port == nil {
		t.Fatal("endpointPickerRef.port is not set")
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == int32(ref.Port.Number) {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		t.Fatalf("EPP Service %s has no port %d", svc.Name, ref.Port.Number)
	}
	ec := epp.Spec.Template.Spec.Containers[0]
	if got, ok := containerPort(ec, sp.TargetPort); !ok || got != 9002 {
		t.Errorf("EPP Service port %d -> %s, want the EPP's gRPC ext-proc port 9002", sp.Port, sp.TargetPort.String())
	}

	routes, _ := objects[*gatewayv1.HTTPRoute](docs)
	gateways, _ := objects[*gatewayv1.Gateway](docs)
	if len(routes) != 1 {
		t.Fatalf("%d HTTPRoutes, want 1", len(routes))
	}
	route := routes[0]
	for _, rule := range route.Spec.Rules {
		if len(rule.BackendRefs) == 0 {
			t.Error("HTTPRoute rule without backendRefs")
		}
		for _, b := range rule.BackendRefs {
			if b.Group == nil || *b.Group != inferenceGroup || b.Kind == nil || *b.Kind != "InferencePool" || string(b.Name) != pool.Name {
				t.Errorf("HTTPRoute backendRef %v/%v %s, want %s InferencePool %s", b.Group, b.Kind, b.Name, inferenceGroup, pool.Name)
			}
		}
	}
	for _, p := range route.Spec.ParentRefs {
		if p.Kind != nil && *p.Kind != "Gateway" {
			t.Errorf("HTTPRoute parentRef kind %s", *p.Kind)
		}
		var gw *gatewayv1.Gateway
		for _, g := range gateways {
			if g.Name == string(p.Name) {
				gw = g
			}
		}
		if gw == nil {
			t.Errorf("HTTPRoute parentRef %s names no Gateway under deploy/kubernetes (gateway/ has the example)", p.Name)
			continue
		}
		if p.Namespace != nil {
			t.Errorf("HTTPRoute parentRef %s: namespace %s (the example Gateway shares the route's)", p.Name, *p.Namespace)
		}
		for _, l := range gw.Spec.Listeners {
			if l.AllowedRoutes != nil && l.AllowedRoutes.Namespaces != nil && l.AllowedRoutes.Namespaces.From != nil &&
				*l.AllowedRoutes.Namespaces.From == gatewayv1.NamespacesFromSelector {
				t.Errorf("Gateway %s listener %s admits routes by selector only", gw.Name, l.Name)
			}
		}
	}
}

var eppBoolFlags = map[string]bool{
	"ha-enable-leader-election": true, "disable-endpoint-subset-filter": true,
	"model-server-metrics-https-insecure-skip-verify": true, "tracing": true, "health-checking": true,
	"enable-pprof": true, "enable-cert-reload": true, "secure-serving": true,
	"metrics-endpoint-auth": true, "zap-devel": true,
}
