package cli

import (
	"bytes"
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/router"
)

// TestInheritedArgs checks which of the router's flags its children get: model and sampling
// flags (with their values, in order) but not the router's own, the address or the API key.
func TestInheritedArgs(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	(&serveFlags{}).register(fs)
	args := []string{"--models-dir", "/m", "-c", "1024", "--api-key", "k", "--port", "8080", "--jinja",
		"--temp=0", "--no-models-autoload", "--models-max", "2", "--offline", "-np", "1", "--host=0.0.0.0"}
	got := inheritedArgs(fs, dashFlagNames(fs, args))
	want := []string{"-c", "1024", "--jinja", "--temp=0", "--offline", "-np", "1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("inherited %q, want %q", got, want)
	}
}

// TestRouterFlags checks that serve without a model is a router, and the router flags' defaults.
func TestRouterFlags(t *testing.T) {
	var errOut bytes.Buffer
	sf, err := parseServeFlags([]string{"--models-max", "2", "--no-models-autoload"}, &errOut, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if !sf.routerMode() || sf.router.modelsMax != 2 || sf.router.autoload {
		t.Errorf("router mode %v, models-max %d, autoload %v", sf.routerMode(), sf.router.modelsMax, sf.router.autoload)
	}
	sf, err = parseServeFlags([]string{"-m", "x.gguf"}, &errOut, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if sf.routerMode() || sf.router.modelsMax != 4 || !sf.router.autoload {
		t.Errorf("with -m: router mode %v, models-max %d, autoload %v", sf.routerMode(), sf.router.modelsMax, sf.router.autoload)
	}
	var out bytes.Buffer
	(&childReporter{on: true, w: &out}).state(router.StateReady, nil)
	if got := out.String(); got != `cmd_child_to_router:state:{"state":"ready"}`+"\n" {
		t.Errorf("state line %q", got)
	}
	var none bytes.Buffer
	(&childReporter{w: &none}).state(router.StateReady, nil)
	if none.Len() != 0 || strings.Contains(none.String(), "state") {
		t.Errorf("outside a router: %q", none.String())
	}
}
