package hf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// attempts is how often a download is tried when the connection or the server fails, waiting
// retryDelay, then twice that, between tries. Every try after the first resumes from the
// bytes already received.
const attempts = 3

var retryDelay = time.Second

// fetch makes sure the snapshot holds file f of commit, downloading it when it is missing
// into blobs/OID (linked from the snapshot) or, without an OID, into the snapshot itself.
// A 64-digit OID is the LFS object's sha256, which the download is checked against; a
// 40-digit one is a git blob id (sha1 of a header and the contents, for small non-LFS files)
// and is not checked.
func (h *hub) fetch(ctx context.Context, cache, repo, commit string, f file, rep reporter) (string, error) {
	dir := repoDir(cache, repo)
	final := filepath.Join(dir, "snapshots", commit, filepath.FromSlash(f.path))
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	target := final
	if f.oid != "" {
		target = filepath.Join(dir, "blobs", f.oid)
	}
	sha := ""
	if isHex(f.oid, 64) {
		sha = strings.ToLower(f.oid)
	}
	if _, err := os.Stat(target); err != nil {
		if err := h.downloadRetrying(ctx, h.fileURL(repo, commit, f.path), target, sha, path.Base(f.path), rep); err != nil {
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
func (h *hub) downloadRetrying(ctx context.Context, u, dst, sha, name string, rep reporter) error {
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
		if retry, err = h.download(ctx, u, dst, sha, name, rep); err == nil || !retry {
			break
		}
	}
	return err
}

// ShaMismatchError is a downloaded file whose sha256 is not the one the Hub lists; the file
// is removed.
type ShaMismatchError struct {
	URL, Got, Want string
}

func (e *ShaMismatchError) Error() string {
	return fmt.Sprintf("downloading %s: sha256 mismatch: got %s, want %s (the file was removed)", e.URL, e.Got, e.Want)
}

// download writes u's body to dst through dst.incomplete and a rename, so that an
// interrupted download never looks complete. A dst.incomplete left by an interrupted
// download is continued with a Range request; a server that ignores the range (200) or
// refuses it (416: the partial file is stale or already whole) makes it start over. When sha
// is set the finished file must have that sha256, or it is removed. retry reports a failure
// worth another attempt.
func (h *hub) download(ctx context.Context, u, dst, sha, name string, rep reporter) (retry bool, err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, err
	}
	tmp := dst + ".incomplete"
	var offset int64
	if st, err := os.Stat(tmp); err == nil {
		offset = st.Size()
	}
	resp, err := h.getFrom(ctx, u, offset)
	var se *statusError
	if offset > 0 && errors.As(err, &se) && se.code == http.StatusRequestedRangeNotSatisfiable {
		offset = 0
		resp, err = h.getFrom(ctx, u, 0)
	}
	if err != nil {
		return !errors.As(err, &se) || se.code >= 500, err
	}
	defer resp.Body.Close()
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if resp.StatusCode != http.StatusPartialContent || !rangeStartsAt(resp.Header.Get("Content-Range"), offset) {
		offset = 0 // the whole file came: start over
		flags |= os.O_TRUNC
	}
	out, err := os.OpenFile(tmp, flags, 0o644)
	if err != nil {
		return false, err
	}
	total := int64(-1)
	if resp.ContentLength >= 0 {
		total = offset + resp.ContentLength
	}
	prog := rep.start(name, offset, total)
	n, err := io.Copy(io.MultiWriter(out, prog), resp.Body)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("got %d of %d bytes", offset+n, total)
	}
	if err != nil {
		prog.stop()
		// dst.incomplete stays: the next attempt, or the next run, continues it.
		return ctx.Err() == nil, fmt.Errorf("downloading %s: %w", u, err)
	}
	prog.finish()
	if sha != "" {
		got, err := fileSHA256(tmp)
		if err != nil {
			return false, err
		}
		if got != sha {
			os.Remove(tmp)
			return false, &ShaMismatchError{URL: u, Got: got, Want: sha}
		}
	}
	return false, os.Rename(tmp, dst)
}

// getFrom fetches u from byte offset on (a Range request when offset > 0); the answer is
// 200 (the whole file) or 206.
func (h *hub) getFrom(ctx context.Context, u string, offset int64) (*http.Response, error) {
	if offset <= 0 {
		return h.get(ctx, u, nil)
	}
	return h.get(ctx, u, http.Header{"Range": {"bytes=" + strconv.FormatInt(offset, 10) + "-"}})
}

// rangeStartsAt reports whether a Content-Range header ("bytes START-END/SIZE") starts at offset.
func rangeStartsAt(cr string, offset int64) bool {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return false
	}
	start, _, ok := strings.Cut(rest, "-")
	n, err := strconv.ParseInt(start, 10, 64)
	return ok && err == nil && n == offset
}

// fileSHA256 is the hex sha256 of the file at p.
func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
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
