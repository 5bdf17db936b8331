package jinja

import (
	"fmt"
	"strings"
)

// tokKind classifies lexer tokens.
type tokKind int

const (
	tokText tokKind = iota
	tokOpenExpr
	tokCloseExpr
	tokOpenStmt
	tokCloseStmt
	tokName
	tokString
	tokInt
	tokFloat
	tokOp
	tokEOF
)

// token is one lexed piece of a template; pos is its byte offset in the source.
type token struct {
	kind tokKind
	val  string
	pos  int
}

// isSpace is C's isspace for ASCII.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ops lists the operator tokens, longest first.
var ops = []string{"==", "!=", "<=", ">=", "//", "**", "+", "-", "*", "/", "%", "~", "<", ">",
	"(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "="}

// lex splits src into tokens with the whitespace rules of llama.cpp's chat-template Jinja:
// line endings normalised to \n, one trailing newline dropped, lstrip_blocks and trim_blocks on,
// and "-" markers stripping whitespace next to a tag.
func lex(src string) ([]token, error) {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n")
	var toks []token
	pos := 0
	for pos < len(src) {
		// Text up to the next tag.
		start := pos
		for pos < len(src) && !(src[pos] == '{' && pos+1 < len(src) && strings.IndexByte("{%#", src[pos+1]) >= 0) {
			pos++
		}
		end := pos
		if pos+1 < len(src) && src[pos] == '{' && (src[pos+1] == '%' || src[pos+1] == '#') {
			// lstrip_blocks: drop spaces between a line start and a block or comment tag.
			i := end
			for i > start {
				c := src[i-1]
				if c == '\n' {
					end = i
					break
				}
				if !isSpace(c) {
					break
				}
				i--
			}
			if i == 0 {
				end = 0
			}
		}
		text := src[start:end]
		if start >= 2 {
			c1, c2 := src[start-2], src[start-1]
			if c2 == '}' && (c1 == '#' || c1 == '%' || c1 == '-') {
				text = strings.TrimPrefix(text, "\n") // trim_blocks
			}
			if start >= 3 && src[start-3] == '-' && c2 == '}' && (c1 == '%' || c1 == '}' || c1 == '#') {
				text = strings.TrimLeft(text, " \t\r\n")
			}
		}
		if pos+2 < len(src) && src[pos] == '{' && src[pos+2] == '-' {
			text = strings.TrimRight(text, " \t\r\n")
		}
		if text != "" {
			toks = append(toks, token{tokText, text, start})
		}
		if pos >= len(src) {
			break
		}
		// A tag.
		open := src[pos+1]
		tagPos := pos
		pos += 2
		if pos < len(src) && src[pos] == '-' {
			pos++
		}
		if open == '#' {
			e := strings.Index(src[pos:], "#}")
			if e < 0 {
				return nil, errorAt(src, tagPos, "missing end of comment tag")
			}
			pos += e + 2
			continue
		}
		closeKind, openKind, closer := tokCloseExpr, tokOpenExpr, "}}"
		if open == '%' {
			closeKind, openKind, closer = tokCloseStmt, tokOpenStmt, "%}"
		}
		toks = append(toks, token{openKind, src[tagPos:pos], tagPos})
		depth := 0
		closed := false
		for pos < len(src) {
			c := src[pos]
			if isSpace(c) {
				pos++
				continue
			}
			if c == '-' && strings.HasPrefix(src[pos+1:], closer) && depth == 0 {
				pos += 3
				closed = true
				break
			}
			if strings.HasPrefix(src[pos:], closer) && depth == 0 {
				pos += 2
				closed = true
				break
			}
			switch {
			case c == '"' || c == '\'':
				s, n, err := lexString(src, pos)
				if err != nil {
					return nil, err
				}
				toks = append(toks, token{tokString, s, pos})
				pos = n
			case c >= '0' && c <= '9':
				n := pos
				for n < len(src) && src[n] >= '0' && src[n] <= '9' {
					n++
				}
				kind := tokInt
				if n+1 < len(src) && src[n] == '.' && src[n+1] >= '0' && src[n+1] <= '9' {
					n++
					for n < len(src) && src[n] >= '0' && src[n] <= '9' {
						n++
					}
					kind = tokFloat
				}
				toks = append(toks, token{kind, src[pos:n], pos})
				pos = n
			case isWordByte(c):
				n := pos
				for n < len(src) && isWordByte(src[n]) {
					n++
				}
				toks = append(toks, token{tokName, src[pos:n], pos})
				pos = n
			default:
				matched := false
				for _, op := range ops {
					if strings.HasPrefix(src[pos:], op) {
						if op == "{" {
							depth++
						} else if op == "}" {
							depth--
						}
						toks = append(toks, token{tokOp, op, pos})
						pos += len(op)
						matched = true
						break
					}
				}
				if !matched {
					return nil, errorAt(src, pos, fmt.Sprintf("unexpected character: %c", c))
				}
			}
		}
		if !closed {
			return nil, errorAt(src, tagPos, "unclosed tag")
		}
		toks = append(toks, token{closeKind, closer, pos})
	}
	toks = append(toks, token{tokEOF, "", len(src)})
	return toks, nil
}

// lexString reads a quoted string literal starting at src[pos], returning its value and the
// offset after the closing quote.
func lexString(src string, pos int) (string, int, error) {
	q := src[pos]
	var b strings.Builder
	i := pos + 1
	for i < len(src) && src[i] != q {
		if src[i] == '\\' && i+1 < len(src) {
			i++
			switch src[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'v':
				b.WriteByte('\v')
			case '\\', '\'', '"':
				b.WriteByte(src[i])
			default:
				b.WriteByte('\\')
				b.WriteByte(src[i])
			}
			i++
			continue
		}
		b.WriteByte(src[i])
		i++
	}
	if i >= len(src) {
		return "", 0, errorAt(src, pos, "unterminated string literal")
	}
	return b.String(), i + 1, nil
}

// errorAt builds an error naming the line and column of offset pos in src.
func errorAt(src string, pos int, msg string) error {
	if pos > len(src) {
		pos = len(src)
	}
	line := strings.Count(src[:pos], "\n") + 1
	col := pos - strings.LastIndexByte(src[:pos], '\n')
	return fmt.Errorf("%s at line %d, column %d", msg, line, col)
}
