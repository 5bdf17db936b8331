package hf

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/charmbracelet/log"
)

// Options say where and how Resolve looks for a model.
type Options struct {
	// File names the repository's file to use (--hf-file), overriding the quant tag.
	File string
	// CacheDir is the Hub cache; "" means CacheDir().
	CacheDir string
	// Endpoint is the Hub's base URL; "" means Endpoint().
	Endpoint string
	// Token authenticates with the Hub (--hf-token, $HF_TOKEN) for gated and private models.
	Token string
	// Offline uses the cache only (--offline): nothing is listed or downloaded.
	Offline bool
	// Client makes the requests; nil means http.DefaultClient.
	Client *http.Client
	// Progress, when set, receives a progress bar for each download (a terminal).
	Progress io.Writer
	// OnProgress, when set, is called as each download goes, at every whole percent (where
	// no terminal shows a bar: see LogProgress, and the router's download child).
	OnProgress func(Progress)
	// Logger receives warnings (a Hub listing that failed and fell back to the cache); nil
	// means log.Default().
	Logger *log.Logger
}

// Resolve returns the local path of the model "ORG/NAME[:QUANT]" names, as llama-server's -hf
// finds it. Online it lists the repository on the Hub (the commit of "main" and its files),
// picks the model file (see pickModel) and downloads it, with every part of a split model,
// unless the cache has it. Offline, or when the listing fails, it picks from the cached
// snapshot of refs/main; a file the cache lacks is then an error.
func Resolve(ctx context.Context, repoTag string, opt Options) (string, error) {
	repo, tag, err := ParseRepo(repoTag)
	if err != nil {
		return "", err
	}
	cache := opt.CacheDir
	if cache == "" {
		if cache, err = CacheDir(); err != nil {
			return "", err
		}
	}
	h := &hub{endpoint: opt.Endpoint, token: opt.Token, client: opt.Client}
	if h.endpoint == "" {
		h.endpoint = Endpoint()
	}
	if h.client == nil {
		h.client = http.DefaultClient
	}
	logger := opt.Logger
	if logger == nil {
		logger = log.Default()
	}

	var files []file
	var commit string
	online := !opt.Offline
	if online {
		if files, commit, err = h.listFiles(ctx, cache, repo); err != nil {
			logger.Warn("listing the repository on the Hub failed; looking in the cache", "repo", repo, "err", err)
			online = false
		}
	}
	if !online {
		if files, commit, err = cachedFiles(cache, repo); err != nil {
			return "", offlineHint(err, opt.Offline)
		}
	}
	primary, err := pickModel(files, tag, opt.File)
	if err != nil {
		return "", fmt.Errorf("hf: %s: %w", repo, err)
	}
	var first string
	for _, f := range modelParts(files, primary) {
		p := filepath.Join(repoDir(cache, repo), "snapshots", commit, filepath.FromSlash(f.path))
		if online {
			if p, err = h.fetch(ctx, cache, repo, commit, f, reporter{bar: opt.Progress, fn: opt.OnProgress}); err != nil {
				return "", fmt.Errorf("hf: %s: %w", repo, err)
			}
		} else if _, err := os.Stat(p); err != nil {
			return "", offlineHint(fmt.Errorf("hf: %s: %s is not in the cache: %w", repo, f.path, err), opt.Offline)
		}
		if f == primary {
			first = p
		}
	}
	return first, nil
}

// offlineHint adds what to do about a file missing from the cache.
func offlineHint(err error, offline bool) error {
	if offline {
		return fmt.Errorf("%w (offline mode: run once without --offline to download it)", err)
	}
	return err
}
