package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// referenceMarker is the media marker of the llama-server whose answers the reference keeps:
// with it, the recorded /completion requests run unchanged.
const referenceMarker = "<__media_2eefsezZah3YwK9Kzaj0YFNAvVCGeTsB__>"

// visionServer serves tinygemma3v with its projector, as the reference's llama-server did.
func visionServer(t *testing.T, mediaPath string) (*httptest.Server, string) {
	t.Helper()
	dir := shareddata.Path(t, "models", "vision")
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: dir + "/tinygemma3v-text-F32.gguf", MMProjPath: dir + "/tinygemma3v-mmproj-F32.gguf", CtxSize: 2048, Slots: 2})
	srv := New(Config{MediaMarker: referenceMarker, MediaPath: mediaPath}, testLogger())
	srv.SetBackend(e)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	return ts, dir
}

// visionCapture is one recorded llama-server exchange of the reference.
type visionCapture struct {
	Path     string          `json:"path"`
	Request  json.RawMessage `json:"request"`
	Status   int             `json:"status"`
	Response json.RawMessage `json:"response"`
}

func readCapture(t *testing.T, dir, name string) visionCapture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "reference", "server", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var c visionCapture
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func postJSON(t *testing.T, url string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// tokenLogprobs are a chat answer's or a /completion answer's token ids and log-probabilities.
func tokenLogprobs(t *testing.T, body []byte) (content string, ids []int, lps []float64, promptTokens int) {
	t.Helper()
	var a struct {
		Choices []struct {
			Message  struct{ Content string }
			Logprobs struct {
				Content []struct {
					ID      int     `json:"id"`
					Logprob float64 `json:"logprob"`
				}
			}
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
		Content         string `json:"content"`
		Tokens          []int  `json:"tokens"`
		TokensEvaluated int    `json:"tokens_evaluated"`
		Probs           []struct {
			ID      int     `json:"id"`
			Logprob float64 `json:"logprob"`
		} `json:"completion_probabilities"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if len(a.Choices) > 0 {
		for _, c := range a.Choices[0].Logprobs.Content {
			ids, lps = append(ids, c.ID), append(lps, c.Logprob)
		}
		return a.Choices[0].Message.Content, ids, lps, a.Usage.PromptTokens
	}
	for _, p := range a.Probs {
		lps = append(lps, p.Logprob)
	}
	return a.Content, a.Tokens, lps, a.TokensEvaluated
}

// The reference's chat and /completion requests (images as data URIs and as multimodal_data)
// give llama-server's tokens, text and prompt size, and its log-probabilities within 1e-3.
func TestVisionMatchesLlamaServer(t *testing.T) {
	ts, dir := visionServer(t, "")
	for _, name := range []string{
		"chat_img_then_describe_sq64", "chat_img_then_describe_rect150x100", "chat_text_then_img_sq64",
		"chat_two_images", "chat_text_only", "completion_multimodal_sq64", "completion_multimodal_rect150x100",
	} {
		c := readCapture(t, dir, name)
		status, body := postJSON(t, ts.URL+c.Path, c.Request)
		if status != c.Status {
			t.Errorf("%s: %d %s", name, status, body)
			continue
		}
		gotText, gotIDs, gotLP, gotPrompt := tokenLogprobs(t, body)
		wantText, wantIDs, wantLP, wantPrompt := tokenLogprobs(t, c.Response)
		if gotText != wantText || fmt.Sprint(gotIDs) != fmt.Sprint(wantIDs) || gotPrompt != wantPrompt {
			t.Errorf("%s: %q %v (%d prompt tokens)\nllama-server %q %v (%d)", name, gotText, gotIDs, gotPrompt, wantText, wantIDs, wantPrompt)
			continue
		}
		worst := 0.0
		for i := range wantLP {
			if i < len(gotLP) {
				worst = max(worst, math.Abs(gotLP[i]-wantLP[i]))
				if math.Abs(gotLP[i]-wantLP[i]) > 1e-3 {
					t.Errorf("%s: token %d logprob %.5f, llama-server %.5f", name, i, gotLP[i], wantLP[i])
				}
			}
		}
		t.Logf("%s: %d tokens as llama-server's, log-probs within %.2g", name, len(wantIDs), worst)
	}
	// /apply-template renders an image as the media marker, as llama-server's
	c := readCapture(t, dir, "apply_template_text_then_img")
	if status, body := postJSON(t, ts.URL+c.Path, c.Request); status != 200 || !jsonEqual(body, c.Response) {
		t.Errorf("apply-template: %d %s, llama-server %s", status, body, c.Response)
	}
	// Anthropic's image blocks (a base64 source) take the same path
	png, err := os.ReadFile(dir + "/img-sq64.png")
	if err != nil {
		t.Fatal(err)
	}
	msg := fmt.Sprintf(`{"max_tokens":16,"temperature":0,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":%q}},{"type":"text","text":"Describe"}]}]}`, base64.StdEncoding.EncodeToString(png))
	status, body := postJSON(t, ts.URL+"/v1/messages", []byte(msg))
	var am struct {
		Content []struct{ Text string }
		Usage   struct {
			InputTokens int `json:"input_tokens"`
			CacheRead   int `json:"cache_read_input_tokens"`
		}
	}
	json.Unmarshal(body, &am)
	if status != 200 || len(am.Content) != 1 || am.Content[0].Text != " "+strings.Repeat("gree", 16) || am.Usage.InputTokens+am.Usage.CacheRead != 28 {
		t.Errorf("/v1/messages with an image: %d %s", status, body)
	}
	// the marker of another server is not this one's: llama-server's 400
	c = readCapture(t, dir, "completion_multimodal_wrong_marker")
	if status, body := postJSON(t, ts.URL+c.Path, c.Request); status != 400 || !strings.Contains(string(body), `"message":"Failed to tokenize prompt`) {
		t.Errorf("wrong marker: %d %s", status, body)
	}
	resp, err := http.Get(ts.URL + "/props")
	if err != nil {
		t.Fatal(err)
	}
	var props struct {
		Modalities  map[string]bool `json:"modalities"`
		MediaMarker string          `json:"media_marker"`
	}
	json.NewDecoder(resp.Body).Decode(&props)
	resp.Body.Close()
	if !props.Modalities["vision"] || props.Modalities["audio"] || props.MediaMarker != referenceMarker {
		t.Errorf("props %+v", props)
	}
}

// Bad images answer 400 with the reason, and the server goes on serving.
func TestVisionBadImages(t *testing.T) {
	media := t.TempDir()
	ts, dir := visionServer(t, media)
	png, err := os.ReadFile(dir + "/img-sq64.png")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(media, "ok.png"), png, 0o644)
	outside := filepath.Join(t.TempDir(), "secret.png")
	os.WriteFile(outside, png, 0o644)
	os.Symlink(outside, filepath.Join(media, "link.png"))
	huge := append([]byte(nil), png...)
	// a 20000 x 20000 header (IHDR width and height, then its checksum)
	copy(huge[16:], []byte{0, 0, 0x4e, 0x20, 0, 0, 0x4e, 0x20})
	fixIHDR(huge)
	chat := func(url string) (int, string) {
		body := fmt.Sprintf(`{"max_tokens":4,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":%q}},{"type":"text","text":"Describe"}]}]}`, url)
		status, b := postJSON(t, ts.URL+"/v1/chat/completions", []byte(body))
		return status, string(b)
	}
	dataURI := func(mime string, b []byte) string {
		return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
	}
	for name, c := range map[string]struct {
		url  string
		want string
	}{
		"truncated": {dataURI("image/png", png[:len(png)/2]), "image 1: invalid image: png: "},
		"huge":      {dataURI("image/png", huge), "image 1: invalid image: 20000x20000 png: over the 67108864-pixel limit"},
		"not image": {dataURI("text/plain", []byte("hello")), `image 1: a data: URI of type \"text/plain\", not an image`},
		"traversal": {"file:///../" + filepath.Base(filepath.Dir(outside)) + "/secret.png", "image 1: file /../"},
		"link out":  {"file:///link.png", "image 1: file /link.png is outside --media-path"},
		"remote":    {"https://example.com/cat.png", "image 1: https URLs are not fetched (start the server with --media-fetch to allow it): send the image as a data: URI"},
	} {
		status, body := chat(c.url)
		if status != 400 || !strings.Contains(body, `"message":"`+c.want) {
			t.Errorf("%s: %d %s, want 400 %q", name, status, body, c.want)
		}
	}
	if status, body := chat("file:///ok.png"); status != 200 {
		t.Errorf("an image in --media-path: %d %s", status, body)
	}
}

// With --media-fetch an http image URL is downloaded (and bounded); without it, refused.
func TestVisionFetch(t *testing.T) {
	dir := shareddata.Path(t, "models", "vision")
	png, err := os.ReadFile(dir + "/img-sq64.png")
	if err != nil {
		t.Fatal(err)
	}
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sq64.png":
			w.Write(png)
		case "/big.png":
			w.Write(make([]byte, fetchMaxBytes+1))
		default:
			http.NotFound(w, r)
		}
	}))
	defer host.Close()
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: dir + "/tinygemma3v-text-F32.gguf", MMProjPath: dir + "/tinygemma3v-mmproj-F32.gguf", CtxSize: 512})
	srv := New(Config{MediaFetch: true}, testLogger())
	srv.SetBackend(e)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer srv.Close()
	chat := func(url string) (int, string) {
		body := fmt.Sprintf(`{"max_tokens":16,"temperature":0,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":%q}},{"type":"text","text":"Describe"}]}]}`, url)
		status, b := postJSON(t, ts.URL+"/v1/chat/completions", []byte(body))
		return status, string(b)
	}
	if status, body := chat(host.URL + "/sq64.png"); status != 200 || !strings.Contains(body, `"content":" `+strings.Repeat("gree", 16)+`"`) {
		t.Errorf("fetched image: %d %s", status, body)
	}
	for path, want := range map[string]string{
		"/missing.png": "HTTP 404",
		"/big.png":     "over the 10485760-byte limit",
	} {
		if status, body := chat(host.URL + path); status != 400 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s, want 400 %q", path, status, body, want)
		}
	}
}

// fixIHDR rewrites a PNG's IHDR checksum after its fields changed.
func fixIHDR(png []byte) {
	crc := crc32IEEE(png[12:29])
	png[29], png[30], png[31], png[32] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
}

func crc32IEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

// /embeddings takes images as /completion does (a prompt object with multimodal_data), and two
// images give two different embeddings.
func TestVisionEmbeddings(t *testing.T) {
	dir := shareddata.Path(t, "models", "vision")
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: dir + "/tinygemma3v-text-F32.gguf", MMProjPath: dir + "/tinygemma3v-mmproj-F32.gguf", CtxSize: 512, Embeddings: true, Pooling: "mean"})
	srv := New(Config{MediaMarker: referenceMarker}, testLogger())
	srv.SetBackend(e)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer srv.Close()
	embed := func(image string) []float64 {
		png, err := os.ReadFile(dir + "/img-" + image + ".png")
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"input":{"prompt_string":%q,"multimodal_data":[%q]}}`, referenceMarker+"Describe", base64.StdEncoding.EncodeToString(png))
		status, b := postJSON(t, ts.URL+"/v1/embeddings", []byte(body))
		var r struct {
			Data  []struct{ Embedding []float64 }
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			}
		}
		if err := json.Unmarshal(b, &r); err != nil || status != 200 || len(r.Data) != 1 || len(r.Data[0].Embedding) != 160 {
			t.Fatalf("%s: %d %s", image, status, b)
		}
		// <bos> <start_of_image> 16 image rows <end_of_image> Describe
		if r.Usage.PromptTokens != 20 {
			t.Errorf("%s: %d prompt tokens, want 20", image, r.Usage.PromptTokens)
		}
		return r.Data[0].Embedding
	}
	if a, b := embed("sq64"), embed("rect150x100"); fmt.Sprint(a) == fmt.Sprint(b) {
		t.Error("two images embed alike")
	}
}

// jsonEqual reports whether two JSON documents hold the same values.
func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}
