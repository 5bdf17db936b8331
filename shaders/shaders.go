// Package shaders holds the WGSL compute kernels, embedded in the binary, one kernel family
// per file, and the small preprocessor that turns a family into a variant (weight type, fused
// epilogue) before the gpu package compiles it.
package shaders

import (
	"embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

//go:embed *.wgsl
var files embed.FS

// includeSuffix marks shared code (block decoders) that kernels pull in with #include.
const includeSuffix = ".inc"

// Source returns kernel family name (a file name without .wgsl) with the given defines applied
// and its #include lines expanded. A define NAME=N (N an unsigned integer) also declares
// `const NAME: u32 = Nu;` (after the source: WGSL wants its enable directives first and takes
// declarations in any order), for sizes a variant fixes so loops over them unroll.
func Source(name string, defines ...string) (string, error) {
	set := map[string]bool{}
	var consts strings.Builder
	for _, d := range defines {
		if k, v, ok := strings.Cut(d, "="); ok {
			if _, err := strconv.ParseUint(v, 10, 32); err != nil || k == "" {
				return "", fmt.Errorf("shaders: %s.wgsl: define %q is not NAME=unsigned", name, d)
			}
			fmt.Fprintf(&consts, "const %s: u32 = %su;\n", k, v)
			d = k
		}
		set[d] = true
	}
	out, err := expand(name, set, 0, map[string]bool{})
	if err != nil {
		return "", fmt.Errorf("shaders: %s.wgsl: %w", name, err)
	}
	return out + consts.String(), nil
}

// expand preprocesses file name and expands its #include lines, each include once per kernel
// (at its first #include: shared includes such as norm_sum.inc may be reached by several paths).
func expand(name string, set map[string]bool, depth int, seen map[string]bool) (string, error) {
	if depth > 4 {
		return "", fmt.Errorf("#include nested too deeply at %q", name)
	}
	b, err := files.ReadFile(name + ".wgsl")
	if err != nil {
		return "", fmt.Errorf("no kernel family or include %q", name)
	}
	src, err := Preprocess(string(b), set)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		if inc, ok := strings.CutPrefix(strings.TrimSpace(line), "//#include "); ok {
			inc = strings.TrimSpace(inc)
			if seen[inc] {
				continue
			}
			seen[inc] = true
			body, err := expand(inc, set, depth+1, seen)
			if err != nil {
				return "", err
			}
			out.WriteString(body)
			continue
		}
		out.WriteString(line)
	}
	return out.String(), nil
}

// Families lists the embedded compute kernel families. Includes are left out, and so are render
// shaders (files with a @vertex entry point, such as gpu/canvas's canvas.wgsl), which Source
// still serves but which have no @compute entry point.
func Families() []string {
	entries, _ := files.ReadDir(".")
	var names []string
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".wgsl")
		if strings.HasSuffix(name, includeSuffix) {
			continue
		}
		if b, err := files.ReadFile(e.Name()); err == nil && strings.Contains(string(b), "@vertex") {
			continue
		}
		names = append(names, name)
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
