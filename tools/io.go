package tools

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// fileIO is where a tool reads, writes, lists and runs: the host (hostIO) or a runtime
// (isolateIO). Paths may be relative to its working directory.
type fileIO interface {
	// resolve makes path absolute against the working directory.
	resolve(path string) string
	isDir(path string) bool
	isFile(path string) bool
	size(path string) (int64, bool)
	readFile(path string) ([]byte, bool)
	writeFile(path string, content []byte) bool
	// list returns the entries under base (absolute) to maxDepth levels (0: all), never
	// descending into junk directories; truncated reports a walk cut short.
	list(base string, maxDepth int, kind listKind) (entries []listEntry, truncated bool, err string)
	// run runs args in the working directory (see runCommand).
	run(ctx context.Context, args []string, maxOutput int, timeout time.Duration, chunk func(string) bool) execResult
}

// listKind is which entries a listing returns.
type listKind int

const (
	listFiles listKind = iota
	listDirs
	listAll
)

// listEntry is one entry of a listing, its path '/'-separated and relative to the base.
type listEntry struct {
	rel   string
	isDir bool
}

// Limits of listings, as llama-server's.
const (
	listTimeout     = 15 * time.Second
	gitListMaxBytes = 8 << 20
)

// junkDirs are listed but never walked: they can be enormous.
var junkDirs = []string{".git", ".svn", ".hg", "node_modules", "__pycache__", ".venv", "venv", "dist", "build", "target", ".cache", ".idea", ".vscode"}

// notADir is the error of a listing whose base is not a directory.
const notADir = "path does not exist or is not a directory"

// newIO returns the I/O of a call: the host, or the runtime it names.
func newIO(c Call) (fileIO, error) {
	if c.Runtime == "" {
		return hostIO{cwd: c.Cwd}, nil
	}
	return openRuntime(c.Runtime, c.Cwd)
}

// hostIO is the server's own machine.
type hostIO struct{ cwd string }

func (h hostIO) resolve(path string) string {
	if path == "~" || strings.HasPrefix(path, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			path = home + path[1:]
		}
	}
	if !filepath.IsAbs(path) {
		base := h.cwd
		if base == "" {
			base, _ = os.Getwd()
		}
		path = filepath.Join(base, path)
	}
	return filepath.ToSlash(filepath.Clean(path))
}

func (h hostIO) isDir(path string) bool {
	st, err := os.Stat(h.resolve(path))
	return err == nil && st.IsDir()
}

func (h hostIO) isFile(path string) bool {
	st, err := os.Stat(h.resolve(path))
	return err == nil && st.Mode().IsRegular()
}

func (h hostIO) size(path string) (int64, bool) {
	st, err := os.Stat(h.resolve(path))
	if err != nil || st.IsDir() {
		return 0, false
	}
	return st.Size(), true
}

func (h hostIO) readFile(path string) ([]byte, bool) {
	b, err := os.ReadFile(h.resolve(path))
	return b, err == nil
}

func (h hostIO) writeFile(path string, content []byte) bool {
	p := h.resolve(path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return false
	}
	return os.WriteFile(p, content, 0o644) == nil
}

func (h hostIO) list(base string, maxDepth int, kind listKind) ([]listEntry, bool, string) {
	if !h.isDir(base) {
		return nil, false, notADir
	}
	if kind == listFiles {
		// git's list honours .gitignore; outside a repository (or without git) walk instead.
		res := runCommand(context.Background(), []string{"git", "-C", base, "ls-files", "--cached", "--others", "--exclude-standard"}, "", nil, gitListMaxBytes, listTimeout, false, nil)
		if res.exitCode == 0 && !res.timedOut {
			var out []listEntry
			for _, rel := range splitLines(res.output) {
				if (maxDepth == 0 || depth(rel) <= maxDepth) && h.isFile(base+"/"+rel) {
					out = append(out, listEntry{rel: rel})
				}
			}
			return out, false, ""
		}
	}
	w := walker{kind: kind, maxDepth: maxDepth, deadline: time.Now().Add(listTimeout)}
	w.walk(filepath.FromSlash(base), "", 0)
	return w.out, w.truncated, ""
}

func (h hostIO) run(ctx context.Context, args []string, maxOutput int, timeout time.Duration, chunk func(string) bool) execResult {
	return runCommand(ctx, args, h.cwd, nil, maxOutput, timeout, true, chunk)
}

// walker lists a directory tree on the host, in name order, depth first.
type walker struct {
	kind      listKind
	maxDepth  int
	deadline  time.Time
	out       []listEntry
	truncated bool
}

func (w *walker) walk(dir, rel string, d int) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		w.truncated = true
		return
	}
	for _, e := range entries {
		if time.Now().After(w.deadline) {
			w.truncated = true
			return
		}
		name := e.Name()
		r := name
		if rel != "" {
			r = rel + "/" + name
		}
		full := filepath.Join(dir, name)
		if e.IsDir() {
			if w.kind != listFiles {
				w.out = append(w.out, listEntry{rel: r, isDir: true})
			}
			// A symbolic link (not IsDir here) is never walked: it may loop.
			if !slices.Contains(junkDirs, name) && (w.maxDepth == 0 || d+1 < w.maxDepth) {
				w.walk(full, r, d+1)
			}
			continue
		}
		st, err := os.Stat(full)
		switch {
		case err != nil:
		case st.Mode().IsRegular() && w.kind != listDirs:
			w.out = append(w.out, listEntry{rel: r})
		case st.IsDir() && w.kind != listFiles:
			w.out = append(w.out, listEntry{rel: r, isDir: true}) // a link to a directory: listed, not walked
		}
	}
}

// depth is the number of parts of a relative path: "a/b/c" is 3.
func depth(rel string) int { return 1 + strings.Count(rel, "/") }

// splitLines splits command output into its non-empty lines, '/'-separated, without "./".
func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSuffix(l, "\r")
		l = strings.TrimPrefix(l, "./")
		if l != "" {
			out = append(out, strings.ReplaceAll(l, "\\", "/"))
		}
	}
	return out
}
