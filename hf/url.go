package hf

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// URLOptions say where and how FetchURL gets a file.
type URLOptions struct {
	// Dest is where the file goes (llama-server's -m given with --model-url); "" means the
	// URL's file name in URLCacheDir().
	Dest string
	// Offline uses an existing file only: nothing is downloaded.
	Offline bool
	// Client makes the request; nil means http.DefaultClient.
	Client *http.Client
	// Progress, when set, receives a progress bar for the download (a terminal).
	Progress io.Writer
	// OnProgress, when set, is called at every whole percent of the download.
	OnProgress func(Progress)
}

// URLCacheDir is where llama.cpp keeps files downloaded from plain URLs: $LLAMA_CACHE, else
// $XDG_CACHE_HOME/llama.cpp, else ~/.cache/llama.cpp.
func URLCacheDir() (string, error) {
	if v := os.Getenv("LLAMA_CACHE"); v != "" {
		return v, nil
	}
	if v := os.Getenv("XDG_CACHE_HOME"); v != "" {
		return filepath.Join(v, "llama.cpp"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set LLAMA_CACHE (%w)", err)
	}
	return filepath.Join(home, ".cache", "llama.cpp"), nil
}

// URLFileName is the file name llama.cpp stores a URL's download under: the last path
// segment, without query or fragment.
func URLFileName(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL", rawURL)
	}
	name := path.Base(u.Path)
	if name == "." || name == "/" || name == ".." || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("%q names no file", rawURL)
	}
	return name, nil
}

// FetchURL returns the local path of the file at rawURL, as llama-server's --model-url: an
// existing file there is used as it is; otherwise, unless offline, it is downloaded (through
// a .incomplete file and a rename, retried on network and server errors).
func FetchURL(ctx context.Context, rawURL string, opt URLOptions) (string, error) {
	name, err := URLFileName(rawURL)
	if err != nil {
		return "", err
	}
	dst := opt.Dest
	if dst == "" {
		dir, err := URLCacheDir()
		if err != nil {
			return "", err
		}
		dst = filepath.Join(dir, name)
	}
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if opt.Offline {
		return "", fmt.Errorf("%s is not downloaded yet and --offline forbids it (from %s)", dst, rawURL)
	}
	h := &hub{client: opt.Client}
	if h.client == nil {
		h.client = http.DefaultClient
	}
	// Without a hash to check a continued file against, a plain URL's download starts afresh
	// and leaves nothing behind when it fails (retries within it still continue).
	tmp := dst + ".incomplete"
	os.Remove(tmp)
	if err := h.downloadRetrying(ctx, rawURL, dst, "", name, reporter{bar: opt.Progress, fn: opt.OnProgress}); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return dst, nil
}
