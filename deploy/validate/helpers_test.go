package validate

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var tempDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// repoRoot is the wgpu-llama repository this module lies in (../.. of the test's directory).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.HasPrefix(string(mod), "module github.com/wgpu-llama/wgpu-llama\n") {
		t.Fatalf("%s is not the wgpu-llama repository (go.mod: %v)", root, err)
	}
	return root
}

func kubeDir(t *testing.T) string { return filepath.Join(repoRoot(t), "deploy", "kubernetes") }

var (
	loadOnce sync.Once
	loaded   []Doc
	loadErrs []error
)

// manifests are the decoded documents under deploy/kubernetes; a test needing them stops when
// any did not decode (TestManifestsDecodeStrictly names each).
func manifests(t *testing.T) []Doc {
	t.Helper()
	dir := kubeDir(t)
	loadOnce.Do(func() { loaded, loadErrs = LoadDir(dir) })
	if len(loadErrs) > 0 {
		t.Fatalf("%d manifest documents do not decode: %v", len(loadErrs), loadErrs)
	}
	return loaded
}

// objects returns the objects of type T among docs, with their documents.
func objects[T any](docs []Doc) ([]T, []Doc) {
	var out []T
	var where []Doc
	for _, d := range docs {
		if o, ok := d.Obj.(T); ok {
			out = append(out, o)
			where = append(where, d)
		}
	}
	return out, where
}

// named returns the object of type T called name, failing the test when there is none.
func named[T interface{ GetName() string }](t *testing.T, docs []Doc, what, name string) T {
	t.Helper()
	all, _ := objects[T](docs)
	for _, o := range all {
		if o.GetName() == name {
			return o
		}
	}
	var zero T
	t.Fatalf("no %s named %q under deploy/kubernetes", what, name)
	return zero
}

func matches(selector, podLabels map[string]string) bool {
	return len(selector) > 0 && labels.SelectorFromSet(selector).Matches(labels.Set(podLabels))
}

// deploymentsSelected returns the Deployments whose pods the selector picks.
func deploymentsSelected(docs []Doc, selector map[string]string) []*appsv1.Deployment {
	deps, _ := objects[*appsv1.Deployment](docs)
	var out []*appsv1.Deployment
	for _, d := range deps {
		if matches(selector, d.Spec.Template.Labels) {
			out = append(out, d)
		}
	}
	return out
}

// containerPort resolves a probe's or Service's port (a number or a port name) against c.
func containerPort(c corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// Flag is one command-line flag of a container's args: its name without dashes and its value
// ("" for a boolean given alone).
type Flag struct{ Name, Value string }

// parseArgs splits args into flags, as Go's flag package and pflag read them: -name, --name,
// --name=value, and --name value for any flag that isBool does not call boolean. Anything else
// (a positional argument) is an error.
func parseArgs(t *testing.T, args []string, isBool func(string) bool) []Flag {
	t.Helper()
	var out []Flag
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			t.Errorf("argument %q is not a flag", a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		if k, v, ok := strings.Cut(name, "="); ok {
			out = append(out, Flag{k, v})
			continue
		}
		if isBool(name) {
			out = append(out, Flag{name, ""})
			continue
		}
		if i+1 >= len(args) {
			t.Errorf("flag %q has no value", a)
			continue
		}
		out = append(out, Flag{name, args[i+1]})
		i++
	}
	return out
}

func flagValue(flags []Flag, names ...string) (string, bool) {
	for _, f := range flags {
		for _, n := range names {
			if f.Name == n {
				return f.Value, true
			}
		}
	}
	return "", false
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binOut  []byte
)

// serverBinary is the wgpu-llama binary: $WGPU_LLAMA_BIN, or one built from this repository
// (cached by Go's build cache, so it costs a link when the tree was built before).
func serverBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WGPU_LLAMA_BIN"); p != "" {
		return p
	}
	root := repoRoot(t)
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wgpu-llama-deploy-check-")
		if err != nil {
			binErr = err
			return
		}
		tempDirs = append(tempDirs, dir)
		binPath = filepath.Join(dir, "wgpu-llama")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/wgpu-llama")
		cmd.Dir = root
		binOut, binErr = cmd.CombinedOutput()
	})
	if binErr != nil {
		t.Fatalf("go build ./cmd/wgpu-llama: %v\n%s", binErr, binOut)
	}
	return binPath
}

// PendingServerFlags are flags the manifests use that the server may not list yet: another
// change adds them (--metrics-compat); each takes a value. Remove one once it has landed.
var PendingServerFlags = map[string]bool{"metrics-compat": true}

// serverIsBool tells the server's boolean flags, from its --help.
func serverIsBool(t *testing.T) func(string) bool {
	t.Helper()
	known := serverFlags(t)
	return func(n string) bool { return known[n] }
}

var helpFlagRE = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_.-]*)(?:\s+(\S+))?`)

// serverFlags are the flags `wgpu-llama --help` lists, each with whether it is boolean (Go's
// flag package prints a value's type word after the name of every other).
func serverFlags(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(serverBinary(t), "--help").CombinedOutput()
	flags := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if m := helpFlagRE.FindStringSubmatch(sc.Text()); m != nil {
			flags[m[1]] = m[2] == ""
		}
	}
	if len(flags) < 20 {
		t.Fatalf("wgpu-llama --help listed %d flags (%v):\n%s", len(flags), err, out)
	}
	return flags
}
