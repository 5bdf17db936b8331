package tools

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Result counts of the search tools, as llama-server's.
const (
	globMaxResults = 100
	grepMaxResults = 100
)

func fileGlobSearchTool() *Tool {
	return &Tool{
		Name: "file_glob_search", DisplayName: "File search", Kind: "builtin", UsesCwd: true,
		Description: "Recursively search for files matching a glob pattern under a directory. " +
			"Automatically skips files ignored by .gitignore (when the directory is inside a git repo) " +
			"and common junk directories (.git, node_modules, build, dist, etc.) otherwise. " +
			"A pattern with no '/' (e.g. \"*.cpp\") matches the file's basename at any depth. " +
			"A pattern containing '/' matches the full relative path; unless already anchored with " +
			"\"**/\" or a leading '/', it is automatically prefixed with \"**/\". " +
			"Use type=\"dir\" or \"all\" to also list directories; directory entries are suffixed with '/' in the output. " +
			"Note: directory listings do not apply .gitignore filtering.",
		Parameters: Schema(map[string]any{
			"path":      Prop("string", "Base directory to search in"),
			"include":   Prop("string", `Glob pattern for files to include (e.g. "*.cpp" or "src/**/*.cpp"). Default: **`),
			"exclude":   Prop("string", "Glob pattern for files to exclude"),
			"type":      Prop("string", `Entry type to return: "file" (default), "dir" or "all"`),
			"max_depth": Prop("integer", "Maximum depth to descend into subdirectories (default: 0 = unlimited; 1 = direct children only)"),
			"limit":     Prop("integer", fmt.Sprintf("Maximum number of results to return, capped at %d (default %d)", globMaxResults, globMaxResults)),
		}, "path"),
		Run: fileGlobSearch,
	}
}

func fileGlobSearch(_ context.Context, c Call) (Result, error) {
	r := params{p: c.Params}
	path, include, exclude := r.str("path", true, ""), r.str("include", false, "**"), r.str("exclude", false, "")
	typ, maxDepth, limit := r.str("type", false, "file"), r.int("max_depth", 0), r.int("limit", globMaxResults)
	if r.err != nil {
		return nil, r.err
	}
	if limit < 1 {
		return Failed("invalid limit: %d (expected 1 or more)", limit), nil
	}
	limit = min(limit, globMaxResults)
	kinds := map[string]listKind{"file": listFiles, "dir": listDirs, "all": listAll}
	kind, ok := kinds[typ]
	if !ok {
		return Failed(`invalid type: %s (expected "file", "dir" or "all")`, typ), nil
	}
	io, err := newIO(c)
	if err != nil {
		return nil, err
	}
	base := io.resolve(path)
	entries, truncated, lerr := io.list(base, max(0, maxDepth), kind)
	if lerr != "" {
		return Failed("%s: %s", lerr, path), nil
	}
	var matches []listEntry
	for _, e := range entries {
		if pathGlobMatch(include, e.rel) && (exclude == "" || !pathGlobMatch(exclude, e.rel)) {
			matches = append(matches, e)
		}
	}
	shown := min(len(matches), limit)
	var text strings.Builder
	list := make([]map[string]any, 0, shown)
	for _, m := range matches[:shown] {
		typ, slash := "file", ""
		if m.isDir {
			typ, slash = "dir", "/"
		}
		text.WriteString(m.rel + slash + "\n")
		list = append(list, map[string]any{"path": m.rel, "type": typ})
	}
	fmt.Fprintf(&text, "\n---\nTotal matches: %d\n", len(matches))
	if len(matches) > shown {
		fmt.Fprintf(&text, "[%d results limit reached (%d total matches). Refine the glob pattern to narrow the search.]\n", shown, len(matches))
	}
	if truncated {
		text.WriteString("[results truncated: time budget or unreadable directory]\n")
	}
	// base is absolute, so that a client (the UI's directory picker) can join the entries to it.
	return Result{"plain_text_response": text.String(), "entries": list, "base": base}, nil
}

func grepSearchTool() *Tool {
	return &Tool{
		Name: "grep_search", DisplayName: "Grep search", Kind: "builtin", UsesCwd: true,
		Description: "Search for a pattern in files under a path. Returns matching lines with file paths " +
			"(and, unless searching a single file, paths relative to the given directory). " +
			"Automatically skips files ignored by .gitignore (when the directory is inside a git repo) " +
			"and common junk directories (.git, node_modules, build, dist, etc.) otherwise. " +
			"include/exclude: a pattern with no '/' matches the basename at any depth; a pattern " +
			"containing '/' matches the full relative path (auto-anchored with \"**/\" unless already anchored).",
		Parameters: Schema(map[string]any{
			"path":                Prop("string", "File or directory to search in"),
			"pattern":             Prop("string", "Pattern to search for (regular expression unless literal is true)"),
			"include":             Prop("string", "Glob pattern to filter files (default: **)"),
			"exclude":             Prop("string", "Glob pattern to exclude files"),
			"return_line_numbers": Prop("boolean", "If true, include line numbers in results"),
			"literal":             Prop("boolean", "Treat pattern as a literal string instead of a regular expression (default: false)"),
			"ignore_case":         Prop("boolean", "Case-insensitive search (default: false)"),
			"context_lines":       Prop("integer", "Number of lines of context to show before and after each match (default: 0)"),
		}, "path", "pattern"),
		Run: grepSearch,
	}
}

func grepSearch(_ context.Context, c Call) (Result, error) {
	r := params{p: c.Params}
	path, pattern := r.str("path", true, ""), r.str("pattern", true, "")
	include, exclude := r.str("include", false, "**"), r.str("exclude", false, "")
	numbers, literal, ignoreCase := r.bool("return_line_numbers"), r.bool("literal"), r.bool("ignore_case")
	ctxLines := max(0, r.int("context_lines", 0))
	if r.err != nil {
		return nil, r.err
	}
	// Go's RE2 syntax: ECMAScript's (llama-server's) less backreferences and lookaround, and
	// matching in linear time whatever the pattern.
	if literal {
		pattern = regexp.QuoteMeta(pattern)
	}
	if ignoreCase {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return Failed("invalid regex: %v", err), nil
	}
	io, err := newIO(c)
	if err != nil {
		return nil, err
	}
	type file struct{ abs, shown string }
	var files []file
	abs := io.resolve(path)
	switch {
	case io.isFile(abs):
		files = append(files, file{abs, path})
	case io.isDir(abs):
		entries, _, lerr := io.list(abs, 0, listFiles)
		if lerr != "" {
			return Failed("%s: %s", lerr, path), nil
		}
		for _, e := range entries {
			if pathGlobMatch(include, e.rel) && (exclude == "" || !pathGlobMatch(exclude, e.rel)) {
				files = append(files, file{abs + "/" + e.rel, e.rel})
			}
		}
	default:
		return Failed("path does not exist: %s", path), nil
	}
	var out strings.Builder
	total, limited := 0, false
	showNum := numbers || ctxLines > 0
	for _, f := range files {
		if limited {
			break
		}
		b, ok := io.readFile(f.abs)
		if !ok {
			continue
		}
		lines := fileLines(string(b))
		for i, line := range lines {
			if total >= grepMaxResults {
				limited = true
				break
			}
			if !re.MatchString(line) {
				continue
			}
			for j := max(0, i-ctxLines); j <= min(len(lines)-1, i+ctxLines); j++ {
				sep := "-"
				if j == i {
					sep = ":"
				}
				out.WriteString(f.shown + sep)
				if showNum {
					out.WriteString(strconv.Itoa(j+1) + sep)
				}
				out.WriteString(lines[j] + "\n")
			}
			if ctxLines > 0 {
				out.WriteString("--\n")
			}
			total++
		}
	}
	fmt.Fprintf(&out, "\n---\nTotal matches: %d\n", total)
	if limited {
		fmt.Fprintf(&out, "[%d matches limit reached. Narrow the path/pattern/include to see more.]\n", grepMaxResults)
	}
	return Result{"plain_text_response": out.String()}, nil
}
