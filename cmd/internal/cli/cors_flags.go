package cli

import (
	"flag"
	"fmt"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/server"
)

// corsFlags are llama-server's cross-origin flags: --cors-origins, --cors-methods,
// --cors-headers and --cors-credentials/--no-cors-credentials.
type corsFlags struct {
	origins, methods, headers string
	credentials               bool
}

func (c *corsFlags) register(fs *flag.FlagSet) {
	stringVar(fs, &c.origins, server.DefaultCORSOrigins, "browser origins that may read answers: * (any), localhost (only http(s)://localhost, 127.0.0.1 or [::1], any port), one origin, or a comma-separated list", "cors-origins")
	stringVar(fs, &c.methods, server.DefaultCORSMethods, "Access-Control-Allow-Methods of CORS preflight answers", "cors-methods")
	stringVar(fs, &c.headers, server.DefaultCORSHeaders, "Access-Control-Allow-Headers of CORS preflight answers", "cors-headers")
	c.credentials = true
	fs.Var(&pairFlag{&c.credentials, true}, "cors-credentials", "allow browsers to send credentials (the default; * then echoes the request's origin)")
	fs.Var(&pairFlag{&c.credentials, false}, "no-cors-credentials", "do not allow browsers to send credentials")
}

// policy checks the flags and returns the server's CORS policy.
func (c corsFlags) policy() (server.CORS, error) {
	origins := strings.TrimSpace(c.origins)
	if origins == "" {
		return server.CORS{}, fmt.Errorf("--cors-origins: empty (use * for any origin or localhost for local pages only)")
	}
	for _, o := range strings.Split(origins, ",") {
		if o = strings.TrimSpace(o); o == "" || strings.ContainsAny(o, " \t\r\n") {
			return server.CORS{}, fmt.Errorf("--cors-origins: %q is not a comma-separated list of origins", c.origins)
		}
	}
	if strings.Contains(origins, ",") && (strings.Contains(origins, "*") || containsWord(origins, "localhost")) {
		return server.CORS{}, fmt.Errorf("--cors-origins: * and localhost stand alone, not in a list (%q)", c.origins)
	}
	for name, v := range map[string]string{"--cors-methods": c.methods, "--cors-headers": c.headers} {
		if strings.TrimSpace(v) == "" || strings.ContainsAny(v, "\r\n") {
			return server.CORS{}, fmt.Errorf("%s: %q is not a header value", name, v)
		}
	}
	return server.CORS{Origins: origins, Methods: c.methods, Headers: c.headers, NoCredentials: !c.credentials}, nil
}

// containsWord reports whether the comma-separated list holds w as one of its items.
func containsWord(list, w string) bool {
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == w {
			return true
		}
	}
	return false
}
