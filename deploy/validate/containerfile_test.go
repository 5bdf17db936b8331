package validate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Instruction is one instruction of a Dockerfile: its keyword and the rest of its line, with
// continuation lines joined.
type Instruction struct {
	Line    int
	Keyword string
	Args    string
}

var dockerfileKeywords = map[string]bool{
	"FROM": true, "RUN": true, "CMD": true, "LABEL": true, "MAINTAINER": true, "EXPOSE": true,
	"ENV": true, "ADD": true, "COPY": true, "ENTRYPOINT": true, "VOLUME": true, "USER": true,
	"WORKDIR": true, "ARG": true, "ONBUILD": true, "STOPSIGNAL": true, "HEALTHCHECK": true, "SHELL": true,
}

// parseDockerfile splits a Dockerfile into instructions (comments and blank lines dropped, a
// line ending in a backslash continued), failing on an unknown keyword.
func parseDockerfile(t *testing.T, text string) []Instruction {
	t.Helper()
	var out []Instruction
	var cur *Instruction
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == nil && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur != nil && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		cont := strings.HasSuffix(trimmed, "\\")
		trimmed = strings.TrimSuffix(trimmed, "\\")
		if cur == nil {
			kw, rest, _ := strings.Cut(trimmed, " ")
			if !dockerfileKeywords[kw] {
				t.Errorf("line %d: %q is not a Dockerfile instruction (in capitals)", i+1, kw)
			}
			cur = &Instruction{Line: i + 1, Keyword: kw, Args: strings.TrimSpace(rest)}
		} else {
			cur.Args += " " + strings.TrimSpace(trimmed)
		}
		if !cont {
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		t.Errorf("line %d: the last instruction ends in a continuation", cur.Line)
	}
	return out
}

type stage struct {
	Name, Image  string
	Instructions []Instruction
}

func TestContainerfile(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "deploy", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	var stages []*stage
	for _, in := range parseDockerfile(t, text) {
		if in.Keyword == "FROM" {
			f := strings.Fields(in.Args)
			f = slices.DeleteFunc(f, func(s string) bool { return strings.HasPrefix(s, "--") })
			if len(f) != 3 || !strings.EqualFold(f[1], "AS") {
				t.Errorf("line %d: FROM %s: every stage is named (FROM image AS name)", in.Line, in.Args)
				stages = append(stages, &stage{Image: f[0]})
				continue
			}
			for _, s := range stages {
				if s.Name == f[2] {
					t.Errorf("line %d: stage %s named twice", in.Line, f[2])
				}
			}
			if !strings.Contains(f[0], ":") || strings.HasSuffix(f[0], ":latest") {
				t.Errorf("line %d: image %s has no pinned tag", in.Line, f[0])
			}
			stages = append(stages, &stage{Name: f[2], Image: f[0]})
			continue
		}
		if len(stages) == 0 {
			if in.Keyword != "ARG" {
				t.Errorf("line %d: %s before the first FROM", in.Line, in.Keyword)
			}
			continue
		}
		s := stages[len(stages)-1]
		s.Instructions = append(s.Instructions, in)
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(stages))
	}
	build, runtime := stages[0], stages[len(stages)-1]

	// The build stage: Go at least go.mod's version, cgo on, building ./cmd/wgpu-llama.
	mod, _ := os.ReadFile(filepath.Join(root, "go.mod"))
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goVersion == nil {
		t.Fatal("go.mod has no go line")
	}
	if !strings.HasPrefix(build.Image, "golang:"+string(goVersion[1])+"-") {
		t.Errorf("build stage image %s, want golang:%s-... (go.mod's Go)", build.Image, goVersion[1])
	}
	outputs := map[string]bool{}
	buildRE := regexp.MustCompile(`go build .*-o (\S+) (\./cmd/\S+)`)
	for _, in := range build.Instructions {
		if in.Keyword != "RUN" {
			continue
		}
		if strings.Contains(in.Args, "CGO_ENABLED=0") {
			t.Errorf("line %d: the binary needs cgo (wgpu-native)", in.Line)
		}
		if m := buildRE.FindStringSubmatch(in.Args); m != nil {
			outputs[m[1]] = true
			if _, err := os.Stat(filepath.Join(root, m[2])); err != nil {
				t.Errorf("line %d: %s: %v", in.Line, m[2], err)
			}
			if m[2] != "./cmd/wgpu-llama" {
				t.Errorf("line %d: builds %s, want ./cmd/wgpu-llama", in.Line, m[2])
			}
		}
	}
	if len(outputs) == 0 {
		t.Error("the build stage runs no go build -o PATH ./cmd/wgpu-llama")
	}

	// The runtime stage.
	if runtime.Image != "debian:bookworm-slim" {
		t.Errorf("runtime image %s, want debian:bookworm-slim", runtime.Image)
	}
	var binary, user, entry string
	env := map[string]string{}
	var exposed []int
	installed := ""
	for _, in := range runtime.Instructions {
		switch in.Keyword {
		case "COPY":
			f := strings.Fields(in.Args)
			if len(f) == 3 && strings.HasPrefix(f[0], "--from=") {
				from := strings.TrimPrefix(f[0], "--from=")
				if from != build.Name {
					t.Errorf("line %d: COPY --from=%s, want the build stage %s", in.Line, from, build.Name)
				}
				if !outputs[f[1]] {
					t.Errorf("line %d: COPY %s: the build stage writes no such file (it writes %v)", in.Line, f[1], outputs)
				}
				binary = f[2]
			}
		case "RUN":
			if strings.Contains(in.Args, "apt-get install") {
				installed += " " + in.Args
			}
		case "USER":
			user = in.Args
		case "ENV":
			for _, m := range regexp.MustCompile(`(\w+)=(\S+)`).FindAllStringSubmatch(in.Args, -1) {
				env[m[1]] = m[2]
			}
		case "EXPOSE":
			for _, p := range strings.Fields(in.Args) {
				n, _ := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
				exposed = append(exposed, n)
			}
		case "ENTRYPOINT":
			var argv []string
			if err := json.Unmarshal([]byte(in.Args), &argv); err != nil || len(argv) == 0 {
				t.Errorf("line %d: ENTRYPOINT %s is not an exec-form JSON array", in.Line, in.Args)
			} else {
				entry = argv[0]
			}
		}
	}
	if binary == "" || entry != binary {
		t.Errorf("ENTRYPOINT %q, want the binary copied from the build stage (%q)", entry, binary)
	}
	for _, pkg := range []string{"libvulkan1", "mesa-vulkan-drivers"} {
		if !slices.Contains(strings.Fields(installed), pkg) {
			t.Errorf("the runtime stage does not install %s", pkg)
		}
	}
	caps := strings.Split(env["NVIDIA_DRIVER_CAPABILITIES"], ",")
	for _, c := range []string{"compute", "utility", "graphics"} {
		if !slices.Contains(caps, c) {
			t.Errorf("NVIDIA_DRIVER_CAPABILITIES %q lacks %s (graphics mounts the Vulkan ICD)", env["NVIDIA_DRIVER_CAPABILITIES"], c)
		}
	}
	if strings.Contains(text, "://") {
		t.Error("the Containerfile has a URL: packages come through apt-get and the Go module proxy as configured where it is built")
	}
	if !strings.Contains(text, "from the host") {
		t.Error("the Containerfile does not say that the GPU driver comes from the host")
	}

	// What the manifests assume of the image: the port, and the user's id.
	docs := manifests(t)
	dep, c := modelServer(t, docs)
	if port := servingPort(t, c); !slices.Contains(exposed, int(port)) {
		t.Errorf("EXPOSE %v, the Deployment serves on %d", exposed, port)
	}
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q: want a numeric non-root user (runAsNonRoot checks a number)", user)
	} else if sc := dep.Spec.Template.Spec.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser != int64(n) {
		t.Errorf("the Deployment runs as %d, the image's USER is %d", *sc.RunAsUser, n)
	}

	// The ignore file keeps what the build needs.
	if ig, err := os.ReadFile(filepath.Join(root, "deploy", "Containerfile.dockerignore")); err == nil {
		for _, pat := range strings.Split(string(ig), "\n") {
			pat = strings.TrimSpace(pat)
			if pat == "" || strings.HasPrefix(pat, "#") {
				continue
			}
			for _, need := range []string{"go.mod", "go.sum", "cmd", "cmd/wgpu-llama", "webui", "webui/dist", "server", "engine"} {
				if ok, _ := filepath.Match(pat, need); ok {
					t.Errorf("Containerfile.dockerignore %q leaves out %s, which the build needs", pat, need)
				}
			}
		}
	}
}
