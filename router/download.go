package router

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"

	"github.com/wgpu-llama/wgpu-llama/hf"

	"github.com/wgpu-llama/wgpu-llama/internal/apijson"
)

// The line protocol of a download child (Config.DownloadCommand): it prints
// DownloadProgressPrefix and a JSON hf.Progress as each file goes, and at the end
// DownloadResultPrefix and a JSON DownloadResult.
const (
	DownloadProgressPrefix = "cmd_child_to_router:download:"
	DownloadResultPrefix   = "cmd_child_to_router:download_result:"
)

// DownloadResult is a download child's last line: whether the model is in the cache now,
// where, and why not.
type DownloadResult struct {
	Success bool   `json:"success"`
	Path    string `json:"path,omitempty"`
	Error   string `json:"error,omitempty"`
}

// DownloadResultLine is the line a download child prints at its end.
func DownloadResultLine(res DownloadResult) string {
	b, _ := json.Marshal(res)
	return DownloadResultPrefix + string(b)
}

// DownloadProgressLine is the line a download child prints as a file's download goes.
func DownloadProgressLine(p hf.Progress) string {
	b, _ := json.Marshal(p)
	return DownloadProgressPrefix + string(b)
}

// download answers POST /models {"model": "ORG/NAME[:QUANT]"}: the model is fetched into
// the Hugging Face cache by a child process (Config.DownloadCommand), listed as downloading
// meanwhile, with download_progress events ({"file","done","total"}) and one
// download_finished event at the end (its data says whether it succeeded, and why not). The
// finished entry gives way to the rescanned cache. Cancelling (DELETE /models, Close) kills
// the child; its partial file stays, and the next POST continues it.
func (r *Router) download(w http.ResponseWriter, req *http.Request) {
	name, _, err := modelOfBody(req)
	if err != nil {
		apijson.Error(w, 400, errInvalidRequest, err.Error())
		return
	}
	if name == "" {
		apijson.Error(w, 400, errInvalidRequest, "model must be a non-empty string")
		return
	}
	if _, _, err := hf.ParseRepo(name); err != nil {
		apijson.Error(w, 400, errInvalidRequest, err.Error())
		return
	}
	if r.cfg.Catalog.CacheDir == "" {
		apijson.Error(w, 400, errInvalidRequest, "no Hugging Face cache to download into")
		return
	}
	if len(r.cfg.DownloadCommand) == 0 {
		apijson.Error(w, 400, errInvalidRequest, "this router cannot download models")
		return
	}
	r.mu.Lock()
	if _, ok := r.models[name]; ok {
		r.mu.Unlock()
		apijson.Error(w, 400, errInvalidRequest, fmt.Sprintf("model '%s' already exists", name))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{model: &Model{Name: name, Source: SourceCache, Options: map[string]string{"hf-repo": name}}}
	r.models[name] = in
	r.downloads[name] = cancel
	r.setStatus(name, in, StatusDownloading)
	r.mu.Unlock()
	go func() {
		defer cancel()
		res := r.runDownload(ctx, name)
		data := map[string]any{"success": res.Success}
		if !res.Success {
			data["error"] = res.Error
			r.logger.Warn("download failed", "model", name, "err", res.Error)
		} else {
			r.logger.Info("download finished", "model", name, "path", res.Path)
		}
		r.mu.Lock()
		delete(r.downloads, name)
		in.status = StatusUnloaded
		r.rescan = true
		r.notify()
		r.mu.Unlock()
		r.sse.send(Event{Model: name, Event: "download_finished", Data: data})
	}()
	apijson.Write(w, 200, map[string]any{"success": true})
}

// runDownload runs the download child for model until it ends (or ctx kills it), sending
// its progress as download_progress events and logging it on the console every tenth.
func (r *Router) runDownload(ctx context.Context, model string) DownloadResult {
	argv := append(append([]string{}, r.cfg.DownloadCommand...), "--cache-dir", r.cfg.Catalog.CacheDir)
	if r.cfg.Offline {
		argv = append(argv, "--offline")
	}
	argv = append(argv, model)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return DownloadResult{Error: err.Error()}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return DownloadResult{Error: err.Error()}
	}
	if err := cmd.Start(); err != nil {
		return DownloadResult{Error: fmt.Sprintf("starting the download: %v", err)}
	}
	clog := r.logger.With("model", model)
	console := hf.LogProgress(clog)
	var res *DownloadResult
	var lastErr string // the child's last line on stderr: why it failed, when it says no more
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lastErr = sc.Text()
			clog.Print(lastErr)
		}
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if js, ok := strings.CutPrefix(line, DownloadProgressPrefix); ok {
			var p hf.Progress
			if json.Unmarshal([]byte(js), &p) == nil {
				console(p)
				r.sse.send(Event{Model: model, Event: "download_progress", Data: p})
			}
			continue
		}
		if js, ok := strings.CutPrefix(line, DownloadResultPrefix); ok {
			var rs DownloadResult
			if json.Unmarshal([]byte(js), &rs) == nil {
				res = &rs
			}
			continue
		}
		clog.Info(line)
	}
	wg.Wait() // Wait closes the pipes: read them to the end first
	err = cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return DownloadResult{Error: "download cancelled"}
	case res != nil:
		return *res
	case err != nil:
		return DownloadResult{Error: fmt.Sprintf("the download process failed (%v): %s", err, lastErr)}
	default:
		return DownloadResult{Error: "the download process ended without a result"}
	}
}
