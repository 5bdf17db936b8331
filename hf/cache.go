// Package hf finds models of the Hugging Face Hub (llama-server's -hf ORG/NAME[:QUANT]) in
// the Hub's local cache, downloading them into it when they are missing, as llama.cpp's
// common/hf-cache.cpp and common/download.cpp do.
//
// The cache is the layout huggingface_hub uses, so the two share files:
//
//	DIR/models--ORG--NAME/refs/main                   the commit "main" points at
//	DIR/models--ORG--NAME/snapshots/COMMIT/FILE       the repository's files at that commit
//	DIR/models--ORG--NAME/blobs/OID                   file contents, linked from the snapshots
package hf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// CacheDir is the cache directory, chosen as llama.cpp does: $LLAMA_CACHE, $HF_HUB_CACHE,
// $HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, then
// ~/.cache/huggingface/hub.
func CacheDir() (string, error) {
	for _, e := range []struct{ env, sub string }{
		{"LLAMA_CACHE", ""},
		{"HF_HUB_CACHE", ""},
		{"HUGGINGFACE_HUB_CACHE", ""},
		{"HF_HOME", "hub"},
		{"XDG_CACHE_HOME", filepath.Join("huggingface", "hub")},
	} {
		if v := os.Getenv(e.env); v != "" {
			return filepath.Join(v, e.sub), nil
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("hf: no cache directory: set LLAMA_CACHE or HF_HOME (%w)", err)
	}
	return filepath.Join(home, ".cache", "huggingface", "hub"), nil
}

// ParseRepo splits "ORG/NAME[:QUANT]" into the repository id and the quant tag ("" when
// absent), checking the id as llama.cpp does: letters, digits and _ with single . - or /
// between them, exactly one /.
func ParseRepo(s string) (repo, tag string, err error) {
	repo, tag, _ = strings.Cut(s, ":")
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		tag = s[i+1:] // llama.cpp takes the last ':'-separated part as the tag
	}
	if !validRepoID(repo) {
		return "", "", fmt.Errorf("hf: invalid repository %q, expected <user>/<model>[:quant]", s)
	}
	return repo, tag, nil
}

func validRepoID(id string) bool {
	if id == "" || len(id) > 256 {
		return false
	}
	slashes, special := 0, true // special: the previous character was one of / . -
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
			special = false
		case c == '/' || c == '.' || c == '-':
			if special {
				return false
			}
			if c == '/' {
				slashes++
			}
			special = true
		default:
			return false
		}
	}
	return !special && slashes == 1
}

// repoDir is where the cache keeps a repository.
func repoDir(cache, repo string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// validCommit reports whether s is a 40-digit hex commit hash.
func validCommit(s string) bool { return isHex(s, 40) }

// validOID reports whether s is a git (40) or LFS (64) object id.
func validOID(s string) bool { return isHex(s, 40) || isHex(s, 64) }

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// cachedCommit is the commit refs/main names, else the first valid ref, else "".
func cachedCommit(dir string) string {
	entries, err := os.ReadDir(filepath.Join(dir, "refs"))
	if err != nil {
		return ""
	}
	fallback := ""
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, "refs", e.Name()))
		commit := strings.TrimSpace(string(data))
		if err != nil || !validCommit(commit) {
			continue
		}
		if e.Name() == "main" {
			return commit
		}
		if fallback == "" {
			fallback = commit
		}
	}
	return fallback
}

// file is one file of a repository at a commit.
type file struct {
	path string // in the repository, with / separators
	oid  string // its blob id, "" when unknown
}

// cachedFiles lists the files of the repository's cached snapshot, sorted, and its commit.
func cachedFiles(cache, repo string) (files []file, commit string, err error) {
	dir := repoDir(cache, repo)
	commit = cachedCommit(dir)
	if commit == "" {
		return nil, "", fmt.Errorf("hf: %s is not in the cache %s (no refs/main)", repo, cache)
	}
	snap := filepath.Join(dir, "snapshots", commit)
	err = filepath.WalkDir(snap, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
			rel, _ := filepath.Rel(snap, p)
			files = append(files, file{path: filepath.ToSlash(rel)})
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("hf: %s: the cache has no snapshot of commit %s", repo, commit)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files, commit, err
}
