package tools

import (
	"path"
	"strings"
)

// pathGlobMatch matches a listing's relative path against a search tool's pattern: a pattern
// without '/' matches the base name at any depth; one with '/' the whole path, as if it began
// with "**/" unless it begins with "**" or '/'.
func pathGlobMatch(pattern, rel string) bool {
	if !strings.Contains(pattern, "/") {
		return globMatch(pattern, path.Base(rel))
	}
	if pattern == "**" || strings.HasPrefix(pattern, "**/") || strings.HasPrefix(pattern, "/") {
		return globMatch(pattern, rel)
	}
	return globMatch("**/"+pattern, rel)
}

// globToken is one element of a glob pattern.
type globToken struct {
	kind byte   // 'c' a character, '?' any one, '[' a class, '*' within a part, 'S' "**", '/' "**/"
	c    byte   // the character of 'c'
	set  string // the class's members and ranges, for '['
	neg  bool   // a negated class ([!...] or [^...])
}

// globMatch reports whether s matches pattern: '*' any run of characters but '/', '**' any
// run at all, '**/' any number of whole directories (none included), '?' one character but
// '/', '[abc]', '[a-z]' and '[!...]' one character of (or not of) a class. It runs in time
// proportional to len(pattern)*len(s), whatever the pattern.
func globMatch(pattern, s string) bool {
	toks := parseGlob(pattern)
	n := len(s)
	// next[j]: whether toks[i+1:] matches s[j:]; cur the same for toks[i:].
	next := make([]bool, n+1)
	cur := make([]bool, n+1)
	next[n] = true
	for i := len(toks) - 1; i >= 0; i-- {
		t := toks[i]
		cur[n] = (t.kind == '*' || t.kind == 'S' || t.kind == '/') && next[n]
		slashAhead := false // for '/': some '/' at k >= j with next[k+1]
		for j := n - 1; j >= 0; j-- {
			ch := s[j]
			switch t.kind {
			case 'c':
				cur[j] = ch == t.c && next[j+1]
			case '?':
				cur[j] = ch != '/' && next[j+1]
			case '[':
				cur[j] = ch != '/' && t.matchClass(ch) && next[j+1]
			case '*':
				cur[j] = next[j] || ch != '/' && cur[j+1]
			case 'S':
				cur[j] = next[j] || cur[j+1]
			case '/':
				slashAhead = slashAhead || ch == '/' && next[j+1]
				cur[j] = next[j] || slashAhead
			}
		}
		next, cur = cur, next
	}
	return next[0]
}

func parseGlob(p string) []globToken {
	var toks []globToken
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '*':
			if i+1 < len(p) && p[i+1] == '*' {
				for i+1 < len(p) && p[i+1] == '*' {
					i++
				}
				if i+1 < len(p) && p[i+1] == '/' {
					i++
					toks = append(toks, globToken{kind: '/'})
				} else {
					toks = append(toks, globToken{kind: 'S'})
				}
				continue
			}
			toks = append(toks, globToken{kind: '*'})
		case '?':
			toks = append(toks, globToken{kind: '?'})
		case '[':
			// "[!...]" and "[^...]" negate; a ']' first in the class is a member.
			start, neg := i+1, false
			if start < len(p) && (p[start] == '!' || p[start] == '^') {
				start, neg = start+1, true
			}
			end := -1
			if start < len(p) {
				if k := strings.IndexByte(p[start+1:], ']'); k >= 0 {
					end = start + 1 + k
				}
			}
			if end < 0 {
				toks = append(toks, globToken{kind: 'c', c: c}) // an unclosed '[' is itself
				continue
			}
			toks = append(toks, globToken{kind: '[', set: p[start:end], neg: neg})
			i = end
		default:
			toks = append(toks, globToken{kind: 'c', c: c})
		}
	}
	return toks
}

func (t globToken) matchClass(c byte) bool {
	in := false
	for k := 0; k < len(t.set); k++ {
		if k+2 < len(t.set) && t.set[k+1] == '-' {
			if t.set[k] <= c && c <= t.set[k+2] {
				in = true
			}
			k += 2
			continue
		}
		if t.set[k] == c {
			in = true
		}
	}
	return in != t.neg
}
