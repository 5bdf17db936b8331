package tools

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

func editFileTool() *Tool {
	return &Tool{
		Name: "edit_file", DisplayName: "Edit file", Kind: "builtin", UsesCwd: true, Write: true,
		Description: "Edit a file using exact text replacement. Each edits[].old_text must be unique in the file " +
			"and is matched against the original content, not incrementally. Merge nearby changes into " +
			"one edit instead of overlapping edits. Use write_file to replace the whole file.",
		Parameters: Schema(map[string]any{
			"path": Prop("string", "Path to the file to edit"),
			"edits": map[string]any{
				"type":        "array",
				"description": "One or more exact text replacements to apply",
				"items": Schema(map[string]any{
					"old_text": Prop("string", "Exact text to find; must be unique in the file and must not overlap with other edits"),
					"new_text": Prop("string", "Text to replace old_text with"),
				}, "old_text", "new_text"),
			},
		}, "path", "edits"),
		Run: editFile,
	}
}

// edit is one replacement, placed at index (of the text matched against) with the length it
// replaces.
type edit struct {
	n                int // its place in the request's edits
	old, new         string
	index, matchSize int
}

func editFile(_ context.Context, c Call) (Result, error) {
	path, err := str(c.Params, "path", true, "")
	if err != nil {
		return nil, err
	}
	list, ok := c.Params["edits"].([]any)
	if !ok || len(list) == 0 {
		return Failed(`"edits" must be a non-empty array`), nil
	}
	edits := make([]edit, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, &BadParams{Msg: fmt.Sprintf("edits[%d] must be an object, not %s", i, jsonType(e))}
		}
		r := params{p: m}
		edits[i].old, edits[i].new = r.str("old_text", true, ""), r.str("new_text", true, "")
		if r.err != nil {
			return nil, &BadParams{Msg: fmt.Sprintf("edits[%d]: %v", i, r.err)}
		}
		if edits[i].old == "" {
			return Failed("edits[%d].old_text must not be empty", i), nil
		}
		edits[i].n = i
	}
	io, err := newIO(c)
	if err != nil {
		return nil, err
	}
	b, ok := io.readFile(path)
	if !ok {
		return Failed("failed to open file: %s", path), nil
	}
	original := string(b)
	normalized := normalizeText(original)

	// Text that is not there exactly may be there up to trailing blanks and typographic
	// quotes, dashes and spaces; then every edit is matched against the normalized text.
	fuzzy := false
	for i, e := range edits {
		if strings.Contains(original, e.old) {
			continue
		}
		if !strings.Contains(normalized, normalizeText(e.old)) {
			return Failed("could not find edits[%d].old_text in %s, it must match the file's current content exactly", i, path), nil
		}
		fuzzy = true
	}
	base := original
	if fuzzy {
		base = normalized
	}
	for i := range edits {
		e := &edits[i]
		// Uniqueness is judged on normalized text, so a duplicate differing only in blanks counts.
		if n := countNonOverlapping(normalized, normalizeText(e.old)); n > 1 {
			return Failed("found %d occurrences of edits[%d].old_text in %s, it must be unique", n, i, path), nil
		}
		needle := e.old
		if fuzzy {
			needle = normalizeText(e.old)
		}
		e.index, e.matchSize = strings.Index(base, needle), len(needle)
	}
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].index < edits[j].index })
	for i := 1; i < len(edits); i++ {
		if edits[i-1].index+edits[i-1].matchSize > edits[i].index {
			return Failed("edits[%d] and edits[%d] overlap in %s; merge them into one edit or target disjoint regions", edits[i-1].n, edits[i].n, path), nil
		}
	}
	var updated string
	if fuzzy {
		updated = replaceKeepingLines(original, base, edits)
	} else {
		updated = replace(base, edits, 0)
	}
	if updated == original {
		return Failed("no changes made: the replacement(s) produced identical content"), nil
	}
	if !io.writeFile(path, []byte(updated)) {
		return Failed("failed to write file: %s", path), nil
	}
	return Result{"result": "file edited successfully", "path": path, "edits_applied": len(edits)}, nil
}

// replace applies edits (sorted, disjoint, indexed from offset) to text.
func replace(text string, edits []edit, offset int) string {
	var b strings.Builder
	at := 0
	for _, e := range edits {
		i := e.index - offset
		b.WriteString(text[at:i])
		b.WriteString(e.new)
		at = i + e.matchSize
	}
	b.WriteString(text[at:])
	return b.String()
}

// replaceKeepingLines applies edits matched in the normalized text base, taking the lines no
// edit touches from the original, so that an edit found only after normalizing changes nothing
// else of the file.
func replaceKeepingLines(original, base string, edits []edit) string {
	origLines := linesWithEndings(original)
	var spans [][2]int // each base line's byte range
	at := 0
	for _, l := range linesWithEndings(base) {
		spans = append(spans, [2]int{at, at + len(l)})
		at += len(l)
	}
	type group struct {
		first, end int // lines [first, end)
		edits      []edit
	}
	var groups []group
	for _, e := range edits {
		first := sort.Search(len(spans), func(i int) bool { return spans[i][1] > e.index })
		last := first
		for last < len(spans)-1 && spans[last][1] < e.index+e.matchSize {
			last++
		}
		if n := len(groups); n > 0 && first < groups[n-1].end {
			groups[n-1].end = max(groups[n-1].end, last+1)
			groups[n-1].edits = append(groups[n-1].edits, e)
		} else {
			groups = append(groups, group{first, last + 1, []edit{e}})
		}
	}
	var b strings.Builder
	next := 0
	for _, g := range groups {
		for i := next; i < g.first; i++ {
			b.WriteString(origLines[i])
		}
		from, to := spans[g.first][0], spans[g.end-1][1]
		b.WriteString(replace(base[from:to], g.edits, from))
		next = g.end
	}
	for i := next; i < len(origLines); i++ {
		b.WriteString(origLines[i])
	}
	return b.String()
}

// linesWithEndings splits text into lines that keep their "\n".
func linesWithEndings(text string) []string {
	parts := strings.SplitAfter(text, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// countNonOverlapping counts the non-overlapping occurrences of needle in text.
func countNonOverlapping(text, needle string) int {
	if needle == "" {
		return 0
	}
	return strings.Count(text, needle)
}

// typography maps the characters edits may have been typed with to the ASCII a file holds:
// smart quotes, dashes, the minus sign and the special spaces.
var typography = strings.NewReplacer(
	"\u2018", "'", "\u2019", "'", "\u201A", "'", "\u201B", "'",
	"\u201C", `"`, "\u201D", `"`, "\u201E", `"`, "\u201F", `"`,
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
	"\u00A0", " ", "\u2002", " ", "\u2003", " ", "\u2004", " ", "\u2005", " ", "\u2006", " ",
	"\u2007", " ", "\u2008", " ", "\u2009", " ", "\u200A", " ", "\u202F", " ", "\u205F", " ", "\u3000", " ",
)

// normalizeText strips each line's trailing blanks and replaces its typography, keeping the
// lines where they are.
func normalizeText(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = typography.Replace(strings.TrimRight(l, " \t\r"))
	}
	return strings.Join(lines, "\n")
}
