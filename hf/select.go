package hf

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// defaultTags are tried in order when -hf names no quant, as llama.cpp does; then the first
// model file is taken.
var defaultTags = []string{"Q4_K_M", "Q8_0"}

// splitRe matches the name of one part of a split GGUF: PREFIX-00001-of-00003.
var splitRe = regexp.MustCompile(`(?i)^(.+)-([0-9]{5})-of-([0-9]{5})$`)

// split is a GGUF file name's split-file part, as llama.cpp's get_gguf_split_info reads it.
type split struct {
	prefix       string
	index, count int
}

func splitInfo(p string) split {
	prefix, ok := strings.CutSuffix(p, ".gguf")
	if !ok {
		return split{}
	}
	if m := splitRe.FindStringSubmatch(prefix); m != nil {
		i, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		return split{prefix: m[1], index: i, count: n}
	}
	return split{prefix: prefix, index: 1, count: 1}
}

// isModel reports whether p is a model GGUF rather than a projector, importance matrix or
// speculative-decoding sidecar.
func isModel(p string) bool {
	if !strings.HasSuffix(p, ".gguf") {
		return false
	}
	name := path.Base(p)
	for _, s := range []string{"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"} {
		if strings.Contains(name, s) {
			return false
		}
	}
	return true
}

// pickModel chooses the model file of a repository: the file named by hfFile (compared
// without case), else the first model whose path contains the quant tag followed by . or -
// (without case; Q4_K_M then Q8_0 when tag is ""), else, with no tag, the first model. A
// split model is chosen by its first part. The error lists the GGUF files there are.
func pickModel(files []file, tag, hfFile string) (file, error) {
	if hfFile != "" {
		for _, f := range files {
			if strings.EqualFold(f.path, hfFile) {
				return f, nil
			}
		}
		return file{}, fmt.Errorf("file %q not found in the repository%s", hfFile, listGGUF(files))
	}
	tags := defaultTags
	if tag != "" {
		tags = []string{tag}
	}
	first := func(ok func(file) bool) (file, bool) {
		for _, f := range files {
			if s := splitInfo(f.path); isModel(f.path) && (s.count <= 1 || s.index == 1) && ok(f) {
				return f, true
			}
		}
		return file{}, false
	}
	for _, t := range tags {
		re := regexp.MustCompile(`(?i)` + regexp.QuoteMeta(t) + `[.-]`)
		if f, ok := first(func(f file) bool { return re.MatchString(f.path) }); ok {
			return f, nil
		}
	}
	if tag == "" {
		if f, ok := first(func(file) bool { return true }); ok {
			return f, nil
		}
		return file{}, fmt.Errorf("no GGUF model files in the repository%s", listGGUF(files))
	}
	return file{}, fmt.Errorf("no GGUF file for quant %q in the repository%s", tag, listGGUF(files))
}

// modelParts are the files to fetch for model f: all its parts when it is split.
func modelParts(files []file, f file) []file {
	s := splitInfo(f.path)
	if s.count <= 1 {
		return []file{f}
	}
	var parts []file
	for _, g := range files {
		if gs := splitInfo(g.path); gs.count == s.count && gs.prefix == s.prefix {
			parts = append(parts, g)
		}
	}
	return parts
}

func listGGUF(files []file) string {
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f.path, ".gguf") {
			names = append(names, f.path)
		}
	}
	if len(names) == 0 {
		return " (it has none)"
	}
	return "; GGUF files: " + strings.Join(names, ", ")
}
