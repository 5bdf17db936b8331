// Package shaders holds the WGSL compute kernels, embedded in the binary, one kernel family
// per file, and the small preprocessor that turns a family into a variant (weight type, fused
// epilogue) before the gpu package compiles it.
package shaders

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

//go:embed *.wgsl
var files embed.FS

// Source returns kernel family name (a file name without .wgsl) with the given defines applied.
func Source(name string, defines ...string) (string, error) {
	b, err := files.ReadFile(name + ".wgsl")
	if err != nil {
		return "", fmt.Errorf("shaders: no kernel family %q", name)
	}
	set := map[string]bool{}
	for _, d := range defines {
		set[d] = true
	}
	out, err := Preprocess(string(b), set)
	if err != nil {
		return "", fmt.Errorf("shaders: %s.wgsl: %w", name, err)
	}
	return out, nil
}

// Families lists the embedded kernel families.
func Families() []string {
	entries, _ := files.ReadDir(".")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".wgsl"))
	}
	sort.Strings(names)
	return names
}

// Preprocess keeps or drops lines between #ifdef NAME / #ifndef NAME, #else and #endif
// according to defined. WGSL has no conditional compilation, and variants differ in binding
// types, which override constants cannot express.
func Preprocess(src string, defined map[string]bool) (string, error) {
	type frame struct{ active, parentActive, sawElse bool }
	var stack []frame
	active := true
	var out strings.Builder
	for n, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		directive, arg, _ := strings.Cut(trimmed, " ")
		arg = strings.TrimSpace(arg)
		switch directive {
		case "#ifdef", "#ifndef":
			if arg == "" {
				return "", fmt.Errorf("line %d: %s without a name", n+1, directive)
			}
			cond := defined[arg] == (directive == "#ifdef")
			stack = append(stack, frame{active: active && cond, parentActive: active})
			active = active && cond
		case "#else":
			if len(stack) == 0 || stack[len(stack)-1].sawElse {
				return "", fmt.Errorf("line %d: unexpected #else", n+1)
			}
			f := &stack[len(stack)-1]
			f.sawElse = true
			f.active = f.parentActive && !f.active
			active = f.active
		case "#endif":
			if len(stack) == 0 {
				return "", fmt.Errorf("line %d: unexpected #endif", n+1)
			}
			active = stack[len(stack)-1].parentActive
			stack = stack[:len(stack)-1]
		default:
			if strings.HasPrefix(trimmed, "#") {
				return "", fmt.Errorf("line %d: unknown directive %q", n+1, directive)
			}
			if active {
				out.WriteString(line)
				out.WriteByte('\n')
			}
		}
	}
	if len(stack) != 0 {
		return "", fmt.Errorf("%d unterminated #ifdef", len(stack))
	}
	return out.String(), nil
}
