package hf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Endpoint is the Hub's base URL: $MODEL_ENDPOINT, else $HF_ENDPOINT, else
// https://huggingface.co/, always ending in "/", as llama.cpp's common_get_model_endpoint.
func Endpoint() string {
	e := os.Getenv("MODEL_ENDPOINT")
	if e == "" {
		e = os.Getenv("HF_ENDPOINT")
	}
	if e == "" {
		e = "https://huggingface.co/"
	}
	if !strings.HasSuffix(e, "/") {
		e += "/"
	}
	return e
}

// hub talks to the Hub's API.
type hub struct {
	endpoint string
	token    string
	client   *http.Client
}

// get fetches url, with the token when there is one, and fails on any status but 200 (and
// 206, the answer to a Range header).
func (h *hub) get(ctx context.Context, u string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "wgpu-llama")
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && (resp.StatusCode != http.StatusPartialContent || header.Get("Range") == "") {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		msg := strings.TrimSpace(string(body))
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return nil, &statusError{url: u, code: resp.StatusCode, status: resp.Status, msg: msg}
	}
	return resp, nil
}

// statusError is an answer other than 200 OK.
type statusError struct {
	url, status, msg string
	code             int
}

func (e *statusError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("GET %s: %s", e.url, e.status)
	}
	return fmt.Sprintf("GET %s: %s: %s", e.url, e.status, e.msg)
}

func (h *hub) getJSON(ctx context.Context, u string, v any) error {
	resp, err := h.get(ctx, u, http.Header{"Accept": {"application/json"}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// listFiles asks the Hub for the commit "main" points at (else the first branch) and the
// files of the repository at that commit, as llama.cpp's get_repo_files does, and records the
// branch's commit in the cache's refs.
func (h *hub) listFiles(ctx context.Context, cache, repo string) ([]file, string, error) {
	var refs struct {
		Branches []struct {
			Name         string `json:"name"`
			TargetCommit string `json:"targetCommit"`
		} `json:"branches"`
	}
	if err := h.getJSON(ctx, h.endpoint+"api/models/"+repo+"/refs", &refs); err != nil {
		return nil, "", err
	}
	branch, commit := "", ""
	for _, b := range refs.Branches {
		if !filepath.IsLocal(b.Name) || !validCommit(b.TargetCommit) {
			continue
		}
		if b.Name == "main" || branch == "" {
			branch, commit = b.Name, b.TargetCommit
		}
		if b.Name == "main" {
			break
		}
	}
	if commit == "" {
		return nil, "", fmt.Errorf("%s has no branch with a valid commit", repo)
	}
	var tree []struct {
		Type string `json:"type"`
		Path string `json:"path"`
		OID  string `json:"oid"`
		LFS  *struct {
			OID string `json:"oid"`
		} `json:"lfs"`
	}
	if err := h.getJSON(ctx, h.endpoint+"api/models/"+repo+"/tree/"+commit+"?recursive=true", &tree); err != nil {
		return nil, "", err
	}
	var files []file
	for _, it := range tree {
		if it.Type != "file" || !filepath.IsLocal(filepath.FromSlash(it.Path)) {
			continue // a path that would leave the snapshot is never used
		}
		f := file{path: it.Path, oid: it.OID}
		if it.LFS != nil {
			f.oid = it.LFS.OID
		}
		if f.oid != "" && !validOID(f.oid) {
			continue
		}
		files = append(files, f)
	}
	dir := repoDir(cache, repo)
	if err := writeAtomic(filepath.Join(dir, "refs", branch), []byte(commit)); err != nil {
		return nil, "", err
	}
	return files, commit, nil
}

// fileURL is where the Hub serves a repository's file at a commit.
func (h *hub) fileURL(repo, commit, p string) string {
	return h.endpoint + repo + "/resolve/" + commit + "/" + (&url.URL{Path: p}).EscapedPath()
}

// writeAtomic writes data to path through a temporary file and a rename.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
