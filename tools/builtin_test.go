package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// run runs a built-in tool in dir and fails the test on an error.
func run(t *testing.T, name, dir string, params map[string]any) Result {
	t.Helper()
	set, err := NewSet([]string{"all"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := set.Run(context.Background(), name, Call{Params: params, Cwd: dir})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNewSet(t *testing.T) {
	set, err := NewSet([]string{"read_file", " grep_search"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range set.All() {
		names = append(names, tool.Name)
	}
	if !reflect.DeepEqual(names, []string{"read_file", "grep_search"}) {
		t.Errorf("tools %v", names)
	}
	if _, err := NewSet([]string{"read_file", "rm_rf"}); err == nil || !strings.Contains(err.Error(), `unknown tool "rm_rf". available tools: read_file, file_glob_search, grep_search, exec_shell_command, write_file, edit_file, get_info`) {
		t.Errorf("unknown tool: %v", err)
	}
	if _, err := set.Run(context.Background(), "write_file", Call{}); !errors.As(err, new(*UnknownTool)) {
		t.Errorf("a tool not enabled: %v", err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.txt": "one\ntwo\nthree\n", "big.txt": strings.Repeat("x", 20000) + "\nend\n"})
	if got := run(t, "read_file", dir, map[string]any{"path": "a.txt"}).Text(); got != "one\ntwo\nthree\n" {
		t.Errorf("whole file %q", got)
	}
	if got := run(t, "read_file", dir, map[string]any{"path": "a.txt", "start_line": 2.0, "end_line": 3.0, "append_loc": true}).Text(); got != "2\u2192two\n3\u2192three\n" {
		t.Errorf("range with locations %q", got)
	}
	if got := run(t, "read_file", dir, map[string]any{"path": "big.txt"})["error"]; got != "file too large (20005 bytes, max 16384). Use start_line/end_line to read a portion." {
		t.Errorf("too large: %v", got)
	}
	if got := run(t, "read_file", dir, map[string]any{"path": "big.txt", "start_line": 2.0, "end_line": 2.0}).Text(); got != "end\n" {
		t.Errorf("a range of a large file %q", got)
	}
	if got := run(t, "read_file", dir, map[string]any{"path": "missing.txt"})["error"]; got != "cannot stat file: missing.txt" {
		t.Errorf("missing: %v", got)
	}
	set, _ := NewSet([]string{"read_file"})
	res, err := set.Run(context.Background(), "read_file", Call{Params: map[string]any{"path": filepath.Join(dir, "a.txt")}, Base64: true})
	if err != nil || res["base64"] != base64.StdEncoding.EncodeToString([]byte("one\ntwo\nthree\n")) || res["size_bytes"] != 14 {
		t.Errorf("base64: %v %v", res, err)
	}
	_, err = set.Run(context.Background(), "read_file", Call{Params: map[string]any{"path": 3.0}})
	if bad := new(*BadParams); !errors.As(err, bad) || (*bad).Msg != `parameter "path" must be a string, not a number` {
		t.Errorf("a number as path: %v", err)
	}
}

func TestWriteAndEditFile(t *testing.T) {
	dir := t.TempDir()
	res := run(t, "write_file", dir, map[string]any{"path": "sub/f.txt", "content": "line1\nline2\nline3\n"})
	if res["result"] != "file written successfully" || res["bytes"] != 18 {
		t.Fatalf("write: %v", res)
	}
	res = run(t, "edit_file", dir, map[string]any{"path": "sub/f.txt", "edits": []any{
		map[string]any{"old_text": "line3\n", "new_text": "line3\nline4\n"},
		map[string]any{"old_text": "line2", "new_text": "line2-edited"},
	}})
	if res["result"] != "file edited successfully" || res["edits_applied"] != 2 {
		t.Fatalf("edit: %v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sub/f.txt")); string(b) != "line1\nline2-edited\nline3\nline4\n" {
		t.Errorf("edited %q", b)
	}
	for _, c := range []struct {
		content string
		edits   []any
		want    string
	}{
		{"dup\ndup\n", []any{map[string]any{"old_text": "dup", "new_text": "x"}}, "found 2 occurrences of edits[0].old_text in f.txt, it must be unique"},
		{"line1\nline2\n", []any{map[string]any{"old_text": "line1\nline2", "new_text": "a"}, map[string]any{"old_text": "line2", "new_text": "b"}}, "edits[0] and edits[1] overlap in f.txt; merge them into one edit or target disjoint regions"},
		{"abc\n", []any{map[string]any{"old_text": "xyz", "new_text": "q"}}, "could not find edits[0].old_text in f.txt, it must match the file's current content exactly"},
		{"abc\n", []any{map[string]any{"old_text": "abc", "new_text": "abc"}}, "no changes made: the replacement(s) produced identical content"},
		{"abc\n", []any{map[string]any{"old_text": "", "new_text": "q"}}, "edits[0].old_text must not be empty"},
		{"abc\n", []any{}, `"edits" must be a non-empty array`},
	} {
		writeFiles(t, dir, map[string]string{"f.txt": c.content})
		if got := run(t, "edit_file", dir, map[string]any{"path": "f.txt", "edits": c.edits})["error"]; got != c.want {
			t.Errorf("%q %v: error %v, want %q", c.content, c.edits, got, c.want)
		}
	}
	// Typographic quotes and trailing blanks in old_text still find the line; the lines no edit
	// touches keep their own bytes (the trailing blanks of "keep  ").
	writeFiles(t, dir, map[string]string{"f.txt": "keep  \nsay \"hi\"   \nend\n"})
	res = run(t, "edit_file", dir, map[string]any{"path": "f.txt", "edits": []any{map[string]any{"old_text": "say \u201chi\u201d", "new_text": "say 'bye'"}}})
	if res["result"] != "file edited successfully" {
		t.Fatalf("fuzzy edit: %v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f.txt")); string(b) != "keep  \nsay 'bye'\nend\n" {
		t.Errorf("fuzzy edit gave %q", b)
	}
}

func TestFileGlobSearch(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"top.txt": "", "a/mid.txt": "", "a/b/deep.txt": "", "build/artifact.txt": "", "a/b/c/x.go": ""})
	res := run(t, "file_glob_search", dir, map[string]any{"path": ".", "include": "*.txt"})
	want := "a/b/deep.txt\na/mid.txt\ntop.txt\n\n---\nTotal matches: 3\n"
	if res.Text() != want {
		t.Errorf("files:\n%s\nwant\n%s", res.Text(), want)
	}
	if res["base"] != filepath.ToSlash(dir) {
		t.Errorf("base %v", res["base"])
	}
	res = run(t, "file_glob_search", dir, map[string]any{"path": dir, "type": "dir", "max_depth": 2.0})
	if want := "a/\na/b/\nbuild/\n\n---\nTotal matches: 3\n"; res.Text() != want {
		t.Errorf("directories to depth 2:\n%s", res.Text())
	}
	res = run(t, "file_glob_search", dir, map[string]any{"path": dir, "type": "all", "limit": 2.0, "exclude": "a/b/**"})
	if want := "a/\na/b/\n\n---\nTotal matches: 5\n[2 results limit reached (5 total matches). Refine the glob pattern to narrow the search.]\n"; res.Text() != want {
		t.Errorf("limited:\n%s", res.Text())
	}
	if entries := res["entries"].([]map[string]any); len(entries) != 2 || entries[1]["path"] != "a/b" || entries[1]["type"] != "dir" {
		t.Errorf("entries %v", entries)
	}
	for params, want := range map[string]map[string]any{
		`invalid type: bogus (expected "file", "dir" or "all")`: {"path": dir, "type": "bogus"},
		"invalid limit: 0 (expected 1 or more)":                 {"path": dir, "limit": 0.0},
		"path does not exist or is not a directory: nowhere":    {"path": "nowhere"},
	} {
		if got := run(t, "file_glob_search", dir, want)["error"]; got != params {
			t.Errorf("%v: %v", want, got)
		}
	}
}

func TestGrepSearch(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.go": "package a\n// Marker one\nfunc f() {}\n", "sub/b.txt": "x\nmarker two\ny\n", "node_modules/m.js": "marker\n"})
	res := run(t, "grep_search", dir, map[string]any{"path": ".", "pattern": "marker", "ignore_case": true, "return_line_numbers": true})
	if want := "a.go:2:// Marker one\nsub/b.txt:2:marker two\n\n---\nTotal matches: 2\n"; res.Text() != want {
		t.Errorf("ignoring case:\n%s", res.Text())
	}
	res = run(t, "grep_search", dir, map[string]any{"path": "sub/b.txt", "pattern": "two", "context_lines": 1.0})
	if want := "sub/b.txt-1-x\nsub/b.txt:2:marker two\nsub/b.txt-3-y\n--\n\n---\nTotal matches: 1\n"; res.Text() != want {
		t.Errorf("with context:\n%s", res.Text())
	}
	res = run(t, "grep_search", dir, map[string]any{"path": ".", "pattern": "f()", "literal": true, "include": "*.go"})
	if want := "a.go:func f() {}\n\n---\nTotal matches: 1\n"; res.Text() != want {
		t.Errorf("literal:\n%s", res.Text())
	}
	if got := run(t, "grep_search", dir, map[string]any{"path": ".", "pattern": "("})["error"]; !strings.HasPrefix(got.(string), "invalid regex: ") {
		t.Errorf("bad regex: %v", got)
	}
	many := strings.Repeat("hit\n", 150)
	writeFiles(t, dir, map[string]string{"many.txt": many})
	res = run(t, "grep_search", dir, map[string]any{"path": "many.txt", "pattern": "hit"})
	if !strings.HasSuffix(res.Text(), "Total matches: 100\n[100 matches limit reached. Narrow the path/pattern/include to see more.]\n") {
		t.Errorf("limit: %s", res.Text()[len(res.Text())-120:])
	}
}

func TestExecShellCommand(t *testing.T) {
	dir := t.TempDir()
	res := run(t, "exec_shell_command", dir, map[string]any{"command": "echo out; echo err >&2; pwd; exit 3"})
	if want := "out\nerr\n" + dir + "\n\n[exit code: 3]"; res.Text() != want {
		t.Errorf("output %q, want %q", res.Text(), want)
	}
	res = run(t, "exec_shell_command", dir, map[string]any{"command": "head -c 100 /dev/zero | tr '\\0' x", "max_output_size": 10.0})
	if want := "xxxxxxxxxx\n[output truncated]\n[exit code: 0]"; res.Text() != want {
		t.Errorf("capped %q", res.Text())
	}
	// A timeout kills the shell and what it started; a background process that keeps the pipe
	// open does not hold the call.
	res = run(t, "exec_shell_command", dir, map[string]any{"command": "sleep 30 & echo started; sleep 30", "timeout": 1.0})
	if !strings.HasPrefix(res.Text(), "started\n") || !strings.HasSuffix(res.Text(), " [exit due to timed out]") {
		t.Errorf("timed out: %q", res.Text())
	}
	res = run(t, "exec_shell_command", dir, map[string]any{"command": "sleep 30 >/dev/null 2>&1 & echo bg"})
	if res.Text() != "bg\n\n[exit code: 0]" {
		t.Errorf("background: %q", res.Text())
	}
	var chunks []string
	set, _ := NewSet([]string{"exec_shell_command"})
	if _, err := set.Run(context.Background(), "exec_shell_command", Call{Params: map[string]any{"command": "echo a; sleep 0.2; echo b"}, Chunk: func(s string) bool { chunks = append(chunks, s); return true }}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(chunks, "") != "a\nb\n\n[exit code: 0]" || len(chunks) < 3 {
		t.Errorf("chunks %q", chunks)
	}
}

func TestGetInfo(t *testing.T) {
	dir := t.TempDir()
	res := run(t, "get_info", dir, nil)
	if res["cwd"] != dir || !strings.Contains(res["os"].(string), "Linux") && !strings.Contains(res["os"].(string), "Darwin") {
		t.Errorf("info %v", res)
	}
}
