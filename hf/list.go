package hf

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// CachedModel is one model of the cache as llama-server's router lists it: the repository,
// the quant tag its file name carries ("" when none) and the local path of its (first) file.
type CachedModel struct {
	Repo, Tag, Path string
}

// ID is the name the router lists the model under and -hf accepts: ORG/NAME[:TAG].
func (m CachedModel) ID() string {
	if m.Tag == "" {
		return m.Repo
	}
	return m.Repo + ":" + m.Tag
}

// tagRe finds a quant tag in a GGUF file name (Q4_K_M, IQ2_XS, Q8_0, F16, BF16, ...).
var tagRe = regexp.MustCompile(`(?i)(?:^|[-._])((?:I?Q[0-9]+(?:_[A-Z0-9]+)*)|BF16|F16|F32)$`)

// fileTag is the quant tag at the end of a model file's name, upper-cased, or "".
func fileTag(p string) string {
	name := splitInfo(path.Base(p)).prefix
	if m := tagRe.FindStringSubmatch(name); m != nil {
		return strings.ToUpper(m[1])
	}
	return ""
}

// ListCache lists every model file of every repository cached under cache (at the commit
// refs/main names), one entry per quant; a split model counts once, by its first part, and
// projectors and other sidecar files are left out. A missing cache lists nothing.
func ListCache(cache string) ([]CachedModel, error) {
	entries, err := os.ReadDir(cache)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hf: listing the cache: %w", err)
	}
	var out []CachedModel
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "models--")
		if !ok || !e.IsDir() {
			continue
		}
		repo := strings.Replace(rest, "--", "/", 1)
		if !validRepoID(repo) {
			continue
		}
		files, commit, err := cachedFiles(cache, repo)
		if err != nil {
			continue // a repository without a usable snapshot is not a model
		}
		seen := map[string]bool{}
		for _, f := range files {
			if !isModel(f.path) || splitInfo(f.path).index != 1 {
				continue
			}
			m := CachedModel{Repo: repo, Tag: fileTag(f.path), Path: filepath.Join(repoDir(cache, repo), "snapshots", commit, filepath.FromSlash(f.path))}
			if seen[m.Tag] {
				continue // two files of one quant: -hf takes the first
			}
			seen[m.Tag] = true
			out = append(out, m)
		}
	}
	return out, nil
}

// RemoveFromCache deletes a repository's folder (snapshots, blobs and refs) from the cache.
// It reports whether there was anything to delete.
func RemoveFromCache(cache, repo string) (bool, error) {
	if !validRepoID(repo) {
		return false, fmt.Errorf("hf: invalid repository %q", repo)
	}
	dir := repoDir(cache, repo)
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return false, nil
	}
	return true, os.RemoveAll(dir)
}
