package tools

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
)

// Sizes read_file answers, as llama-server's.
const (
	readMaxBytes       = 16 << 10 // of text, unless a line range is given
	readMaxBytesBase64 = 32 << 20
)

func readFileTool() *Tool {
	return &Tool{
		Name: "read_file", DisplayName: "Read file", Kind: "builtin", UsesCwd: true,
		Description: "Read the contents of a file. Optionally specify a 1-based line range. " +
			"If append_loc is true, each line is prefixed with its line number (e.g. \"1\u2192...\").",
		Parameters: Schema(map[string]any{
			"path":       Prop("string", "Path to the file"),
			"start_line": Prop("integer", "First line to read, 1-based (default: 1)"),
			"end_line":   Prop("integer", "Last line to read, 1-based inclusive (default: end of file)"),
			"append_loc": Prop("boolean", "Prefix each line with its line number"),
		}, "path"),
		Run: readFile,
	}
}

func readFile(_ context.Context, c Call) (Result, error) {
	r := params{p: c.Params}
	path, start, end, loc := r.str("path", true, ""), r.int("start_line", 1), r.int("end_line", -1), r.bool("append_loc")
	if r.err != nil {
		return nil, r.err
	}
	io, err := newIO(c)
	if err != nil {
		return nil, err
	}
	size, ok := io.size(path)
	if !ok {
		return Failed("cannot stat file: %s", path), nil
	}
	if c.Base64 {
		if size > readMaxBytesBase64 {
			return Failed("file too large (%d bytes, max %d)", size, readMaxBytesBase64), nil
		}
		b, ok := io.readFile(path)
		if !ok {
			return Failed("failed to open file: %s", path), nil
		}
		return Result{"base64": base64.StdEncoding.EncodeToString(b), "size_bytes": len(b)}, nil
	}
	if size > readMaxBytes && end == -1 {
		return Failed("file too large (%d bytes, max %d). Use start_line/end_line to read a portion.", size, readMaxBytes), nil
	}
	b, ok := io.readFile(path)
	if !ok {
		return Failed("failed to open file: %s", path), nil
	}
	var out strings.Builder
	for i, line := range fileLines(string(b)) {
		n := i + 1
		if n < start {
			continue
		}
		if end != -1 && n > end {
			break
		}
		if loc {
			line = strconv.Itoa(n) + "\u2192" + line
		}
		if out.Len()+len(line)+1 > readMaxBytes {
			out.WriteString("[output truncated]")
			break
		}
		out.WriteString(line + "\n")
	}
	return Result{"plain_text_response": out.String()}, nil
}

// fileLines splits text into lines as C++'s getline does: a final newline ends the last line
// rather than starting an empty one.
func fileLines(text string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

func writeFileTool() *Tool {
	return &Tool{
		Name: "write_file", DisplayName: "Write file", Kind: "builtin", UsesCwd: true, Write: true,
		Description: "Write content to a file, creating it (including parent directories) if it does not exist. May use with edit_file for more complex edits.",
		Parameters: Schema(map[string]any{
			"path":    Prop("string", "Path of the file to write"),
			"content": Prop("string", "Content to write"),
		}, "path", "content"),
		Run: writeFile,
	}
}

func writeFile(_ context.Context, c Call) (Result, error) {
	r := params{p: c.Params}
	path, content := r.str("path", true, ""), r.str("content", true, "")
	if r.err != nil {
		return nil, r.err
	}
	io, err := newIO(c)
	if err != nil {
		return nil, err
	}
	if !io.writeFile(path, []byte(content)) {
		return Failed("failed to write file: %s", path), nil
	}
	return Result{"result": "file written successfully", "path": path, "bytes": len(content)}, nil
}
