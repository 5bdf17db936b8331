package tools

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Limits of the helper commands an isolate runs (the shell tool has its own timeout).
const (
	isolateTimeout     = 15 * time.Second
	isolateReadMaxSize = 64 << 20
)

// isolateIO runs every operation as a command in a runtime (a container, an ssh host), which
// must offer a POSIX sh, cat, wc, mkdir, dirname, find and timeout. Its paths are POSIX paths
// whatever the server's system.
type isolateIO struct {
	cwd string
	// wrap turns a command to run in the isolate into the host's command that runs it there.
	wrap func(inner []string, stdin bool) []string
}

func (o *isolateIO) resolve(path string) string {
	if o.cwd == "" || strings.HasPrefix(path, "/") {
		return path
	}
	return o.cwd + "/" + path
}

// exec runs a helper command in the isolate.
func (o *isolateIO) exec(inner []string, stdin []byte, maxOutput int, combineStderr bool) execResult {
	return runCommand(context.Background(), o.wrap(inner, stdin != nil), "", stdin, maxOutput, isolateTimeout, combineStderr, nil)
}

func (o *isolateIO) ok(inner ...string) bool {
	res := o.exec(inner, nil, 4096, true)
	return res.exitCode == 0 && !res.timedOut
}

func (o *isolateIO) isDir(path string) bool {
	return o.ok("sh", "-c", `[ -d "$1" ]`, "_", o.resolve(path))
}

func (o *isolateIO) isFile(path string) bool {
	return o.ok("sh", "-c", `[ -f "$1" ]`, "_", o.resolve(path))
}

func (o *isolateIO) size(path string) (int64, bool) {
	res := o.exec([]string{"sh", "-c", `wc -c < "$1"`, "_", o.resolve(path)}, nil, 64, true)
	if res.exitCode != 0 || res.timedOut {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(res.output), 10, 64)
	return n, err == nil
}

func (o *isolateIO) readFile(path string) ([]byte, bool) {
	// stderr apart: it must not be spliced into the file's bytes
	res := o.exec([]string{"cat", "--", o.resolve(path)}, nil, isolateReadMaxSize, false)
	if res.exitCode != 0 || res.timedOut {
		return nil, false
	}
	return []byte(res.output), true
}

func (o *isolateIO) writeFile(path string, content []byte) bool {
	// The content travels on stdin: nothing for the far side to parse again, no file on the host.
	if content == nil {
		content = []byte{}
	}
	res := o.exec([]string{"sh", "-c", `mkdir -p "$(dirname "$1")" && cat > "$1"`, "_", o.resolve(path)}, content, 4096, true)
	return res.exitCode == 0 && !res.timedOut
}

func (o *isolateIO) list(base string, maxDepth int, kind listKind) ([]listEntry, bool, string) {
	abs := o.resolve(base)
	if !o.isDir(abs) {
		return nil, false, notADir
	}
	if kind == listFiles {
		res := o.exec([]string{"sh", "-c", `cd "$1" && git ls-files --cached --others --exclude-standard`, "_", abs}, nil, gitListMaxBytes, true)
		if res.exitCode == 0 && !res.timedOut {
			var out []listEntry
			for _, rel := range splitLines(res.output) {
				if maxDepth == 0 || depth(rel) <= maxDepth {
					out = append(out, listEntry{rel: rel})
				}
			}
			return out, false, ""
		}
	}
	var out []listEntry
	truncated := false
	for _, dirs := range []bool{true, false} {
		if dirs && kind == listFiles || !dirs && kind == listDirs {
			continue
		}
		rels, cut := o.find(abs, maxDepth, dirs)
		truncated = truncated || cut
		for _, rel := range rels {
			out = append(out, listEntry{rel: rel, isDir: dirs})
		}
	}
	return out, truncated, ""
}

// find lists directories or files under abs with one `find`, which prunes the junk
// directories (listing them, not their contents); -mindepth and -maxdepth serve busybox too.
func (o *isolateIO) find(abs string, maxDepth int, dirs bool) ([]string, bool) {
	prune := make([]string, len(junkDirs))
	for i, n := range junkDirs {
		prune[i] = "-name " + n
	}
	cmd := `cd "$1" && find . -mindepth 1`
	if maxDepth > 0 {
		cmd += " -maxdepth " + strconv.Itoa(maxDepth)
	}
	cmd += ` \( ` + strings.Join(prune, " -o ") + ` \) -prune`
	if dirs {
		cmd += " -print -o -type d -print"
	} else {
		cmd += " -o -type f -print"
	}
	res := o.exec([]string{"sh", "-c", cmd, "_", abs}, nil, gitListMaxBytes, true)
	return splitLines(res.output), res.timedOut
}

// run wraps the command in the isolate's own `timeout`: killing the host's client does not
// kill what runs on the far side.
func (o *isolateIO) run(ctx context.Context, args []string, maxOutput int, timeout time.Duration, chunk func(string) bool) execResult {
	inner := append([]string{"timeout", strconv.Itoa(int(timeout/time.Second)) + "s"}, args...)
	if o.cwd != "" {
		// 127: what a shell reports for a command it could not run
		inner = append([]string{"sh", "-c", `cd "$1" || exit 127; shift; exec "$@"`, "_", o.cwd}, inner...)
	}
	return runCommand(ctx, o.wrap(inner, true), "", []byte{}, maxOutput, timeout+5*time.Second, true, chunk)
}
