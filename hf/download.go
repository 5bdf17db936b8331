package hf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"
)

// attempts is how often a download is tried when the connection or the server fails, waiting
// retryDelay, then twice that, between tries.
const attempts = 3

var retryDelay = time.Second

// fetch makes sure the snapshot holds file f of commit, downloading it when it is missing
// into blobs/OID (linked from the snapshot) or, without an OID, into the snapshot itself.
func (h *hub) fetch(ctx context.Context, cache, repo, commit string, f file, progress io.Writer) (string, error) {
	dir := repoDir(cache, repo)
	final := filepath.Join(dir, "snapshots", commit, filepath.FromSlash(f.path))
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	target := final
	if f.oid != "" {
		target = filepath.Join(dir, "blobs", f.oid)
	}
	if _, err := os.Stat(target); err != nil {
		if err := h.downloadRetrying(ctx, h.fileURL(repo, commit, f.path), target, path.Base(f.path), progress); err != nil {
			return "", err
		}
	}
	if target != final {
		if err := link(target, final); err != nil {
			return "", err
		}
	}
	return final, nil
}

// downloadRetrying is download, tried up to attempts times while it fails in a way worth
// another try, waiting retryDelay, then twice that, between tries.
func (h *hub) downloadRetrying(ctx context.Context, u, dst, name string, progress io.Writer) error {
	var err error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			select {
			case <-time.After(time.Duration(i) * retryDelay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var retry bool
		if retry, err = h.download(ctx, u, dst, name, progress); err == nil || !retry {
			break
		}
	}
	return err
}

// download writes u's body to path through path.incomplete and a rename, so that an
// interrupted download never looks complete. retry reports a failure worth another attempt.
func (h *hub) download(ctx context.Context, u, dst, name string, progress io.Writer) (retry bool, err error) {
	resp, err := h.get(ctx, u, nil)
	if err != nil {
		var se *statusError
		return !errors.As(err, &se) || se.code >= 500, err
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, err
	}
	tmp := dst + ".incomplete"
	out, err := os.Create(tmp)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp) // fails harmlessly once renamed
	var w io.Writer = out
	if progress != nil {
		bar := &progressBar{out: progress, name: name, total: resp.ContentLength}
		defer bar.finish()
		w = io.MultiWriter(out, bar)
	}
	n, err := io.Copy(w, resp.Body)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("got %d of %d bytes", n, resp.ContentLength)
	}
	if err != nil {
		return ctx.Err() == nil, fmt.Errorf("downloading %s: %w", u, err)
	}
	return false, os.Rename(tmp, dst)
}

// link makes final a relative symbolic link to blob, as huggingface_hub lays snapshots out;
// where links cannot be made the blob is moved into the snapshot instead.
func link(blob, final string) error {
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return err
	}
	if rel, err := filepath.Rel(filepath.Dir(final), blob); err == nil && os.Symlink(rel, final) == nil {
		return nil
	}
	return os.Rename(blob, final)
}

// progressBar draws a download's progress on one terminal line, redrawn as the percentage
// changes.
type progressBar struct {
	out   io.Writer
	name  string
	total int64 // -1 when the server did not say
	done  int64
	shown int64 // the percentage (or MiB, without a total) last drawn
}

func (p *progressBar) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	step := p.done >> 20
	if p.total > 0 {
		step = p.done * 100 / p.total
	}
	if step != p.shown || p.done == int64(len(b)) {
		p.shown = step
		p.draw()
	}
	return len(b), nil
}

func (p *progressBar) draw() {
	mib := func(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) }
	if p.total <= 0 {
		fmt.Fprintf(p.out, "\rDownloading %s %s MiB", p.name, mib(p.done))
		return
	}
	const width = 30
	fill := int(p.done * width / p.total)
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < fill {
			bar[i] = '='
		}
	}
	fmt.Fprintf(p.out, "\rDownloading %s [%s] %3d%% %s/%s MiB", p.name, bar, p.done*100/p.total, mib(p.done), mib(p.total))
}

func (p *progressBar) finish() {
	p.draw()
	fmt.Fprintln(p.out)
}
