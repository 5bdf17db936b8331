package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// TestSlotsMatchCapture compares GET /slots with llama-server's after requests: a slot that
// has run a request has every key of slots_after, one that has not only those of slots_before.
func TestSlotsMatchCapture(t *testing.T) {
	ts, _ := newFakeServer(t, Config{})
	status, _, body := do(t, "GET", ts.URL+"/slots", "", nil)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	got := decodeAny(t, []byte(body)).([]any)
	after := decodeAny(t, loadCapture(t, "slots_after").respBody).([]any)
	before := decodeAny(t, loadCapture(t, "slots_before").respBody).([]any)
	compareShape(t, "slot that ran a request", after[0], got[0])
	compareShape(t, "slot before any request", before[1], got[1])
	if n := lookup(t, got[0], "params.n_predict"); n != float64(16) {
		t.Errorf("params.n_predict %v, want 16", n)
	}
	if s := lookup(t, got[0], "params.stream"); s != true {
		t.Errorf("params.stream %v, want true", s)
	}
	idle := `{"has_new_line":false,"has_next_token":false,"n_decoded":0,"n_remain":-1}` // sorted keys
	if nt := string(mustMarshal(t, lookup(t, got[0], "next_token").([]any)[0])); nt != idle {
		t.Errorf("next_token of an idle slot %s, want %s", nt, idle)
	}
}

func TestSlotsFailOnNoSlot(t *testing.T) {
	ts, fb := newFakeServer(t, Config{})
	if status, _, body := do(t, "GET", ts.URL+"/slots?fail_on_no_slot=1", "", nil); status != 200 {
		t.Errorf("with an idle slot: %d %s", status, body)
	}
	fb.slotsBusy = true
	const noSlot = `{"error":{"code":503,"message":"no slot available","type":"unavailable_error"}}`
	if status, _, body := do(t, "GET", ts.URL+"/slots?fail_on_no_slot=1", "", nil); status != 503 || body != noSlot {
		t.Errorf("all slots busy: %d %s", status, body)
	}
	for _, q := range []string{"", "?fail_on_no_slot="} { // an empty value does not count, as in llama-server
		if status, _, body := do(t, "GET", ts.URL+"/slots"+q, "", nil); status != 200 {
			t.Errorf("all slots busy, %q: %d %s", q, status, body)
		}
	}
}

func TestSlotsDisabled(t *testing.T) {
	ts, _ := newFakeServer(t, Config{NoSlots: true})
	const want = `{"error":{"code":501,"message":"This server does not support slots endpoint. Start it with ` + "`--slots`" + `","type":"not_supported_error"}}`
	if status, _, body := do(t, "GET", ts.URL+"/slots", "", nil); status != 501 || body != want {
		t.Errorf("--no-slots: %d %s", status, body)
	}
	const noPath = `{"error":{"code":501,"message":"This server does not support slots action. Start it with ` + "`--slot-save-path`" + `","type":"not_supported_error"}}`
	if status, _, body := do(t, "POST", ts.URL+"/slots/0?action=save", `{"filename":"a.bin"}`, nil); status != 501 || body != noPath {
		t.Errorf("slot action without --slot-save-path: %d %s", status, body)
	}
}

func TestSlotActionsFake(t *testing.T) {
	dir := t.TempDir()
	ts, _ := newFakeServer(t, Config{SlotSavePath: dir})
	post := func(path, body string) (int, string) {
		status, _, got := do(t, "POST", ts.URL+path, body, nil)
		return status, got
	}
	status, body := post("/slots/0?action=save", `{"filename":"s.bin"}`)
	if status != 200 || body != `{"id_slot":0,"filename":"s.bin","n_saved":20,"n_written":2,"timings":{"save_ms":1.5}}` {
		t.Errorf("save: %d %s", status, body)
	}
	if _, err := os.Stat(filepath.Join(dir, "s.bin")); err != nil {
		t.Errorf("save wrote no file in the slot directory: %v", err)
	}
	status, body = post("/slots/1?action=restore", `{"filename":"s.bin"}`)
	if status != 200 || body != `{"id_slot":1,"filename":"s.bin","n_restored":20,"n_read":2,"timings":{"restore_ms":1}}` {
		t.Errorf("restore: %d %s", status, body)
	}
	status, body = post("/slots/1?action=erase", ``)
	if status != 200 || body != `{"id_slot":1,"n_erased":20}` {
		t.Errorf("erase: %d %s", status, body)
	}

	bad := func(msg string) string {
		b, _ := json.Marshal(msg)
		return `{"error":{"code":400,"message":` + string(b) + `,"type":"invalid_request_error"}}`
	}
	for _, tt := range []struct{ path, body, want string }{
		{"/slots/0?action=save", `{"filename":"../x"}`, bad("Invalid filename")},
		{"/slots/0?action=restore", `{"filename":"../x"}`, bad("Invalid filename")},
		{"/slots/0?action=save", `{"filename":"a/b"}`, bad("Invalid filename")},
		{"/slots/0?action=save", `{}`, bad("'filename' is required")},
		{"/slots/0?action=save", ``, bad("'filename' is required")},
		{"/slots/0?action=drop", `{"filename":"s.bin"}`, bad("Invalid action")},
		{"/slots/0", `{"filename":"s.bin"}`, bad("Invalid action")},
		{"/slots/abc?action=save", `{"filename":"s.bin"}`, bad("Invalid slot ID")},
		{"/slots/2?action=save", `{"filename":"s.bin"}`, bad("Invalid slot ID")},
		{"/slots/0?action=restore", `{"filename":"missing.bin"}`, bad(errRestoreSlot)},
	} {
		if status, body := post(tt.path, tt.body); status != 400 || body != tt.want {
			t.Errorf("POST %s %s: %d %s, want 400 %s", tt.path, tt.body, status, body, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x")); err == nil {
		t.Error("a file was written outside the slot directory")
	}
}

func TestValidFilename(t *testing.T) {
	for _, name := range []string{"slot.bin", "a", "ébauche.bin", ".hidden", "a.b.c", "名前.bin", "with space.bin"} {
		if !validFilename(name) {
			t.Errorf("%q refused", name)
		}
	}
	for _, name := range []string{
		"", ".", "..", "../x", "x/..", "a/b", `a\b`, "a..b", "trailing.", " lead", "trail ",
		"c:d", "a*b", "a?b", `a"b`, "a<b", "a>b", "a|b", "tab\there", "nul\x00", "del\x7f",
		"c1\u0085", "full\uff0estop", "div\u2215slash", "set\u2216minus", "bom\ufeff", "repl\ufffd",
		"bad\xff", "overlong\xc0\xaf", strings.Repeat("a", 256),
	} {
		if validFilename(name) {
			t.Errorf("%q accepted", name)
		}
	}
	if !validFilename(strings.Repeat("a", 255)) {
		t.Error("a 255-byte name refused")
	}
}

// TestSlotSaveRestoreEngine runs the round trip over HTTP on the real engine: a request, save,
// erase, restore, and the same request again reuses the restored cache (cache_n > 0) and
// produces the same greedy text.
func TestSlotSaveRestoreEngine(t *testing.T) {
	b := enginetest.Load(t, "models", "stories260K.gguf")
	dir := t.TempDir()
	srv := New(Config{Alias: "stories260K", SlotSavePath: dir}, testLogger())
	srv.SetBackend(b)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	type result struct {
		Content string `json:"content"`
		Timings struct {
			CacheN int `json:"cache_n"`
		} `json:"timings"`
		TokensCached int `json:"tokens_cached"`
	}
	complete := func() result {
		status, _, body := do(t, "POST", ts.URL+"/completion", `{"prompt":"Once upon a time, a little fox","n_predict":20,"temperature":0}`, nil)
		if status != 200 {
			t.Fatalf("completion: %d %s", status, body)
		}
		var r result
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	action := func(q, body string) map[string]any {
		status, _, got := do(t, "POST", ts.URL+"/slots/0?action="+q, body, nil)
		if status != 200 {
			t.Fatalf("%s: %d %s", q, status, got)
		}
		return decodeAny(t, []byte(got)).(map[string]any)
	}
	first := complete()
	saved := action("save", `{"filename":"fox.bin"}`)
	if saved["n_saved"] != float64(first.TokensCached) {
		t.Errorf("n_saved %v, the slot held %d tokens", saved["n_saved"], first.TokensCached)
	}
	if erased := action("erase", ""); erased["n_erased"] != saved["n_saved"] {
		t.Errorf("n_erased %v, want %v", erased["n_erased"], saved["n_saved"])
	}
	restored := action("restore", `{"filename":"fox.bin"}`)
	if restored["n_restored"] != saved["n_saved"] || restored["n_read"] != saved["n_written"] {
		t.Errorf("restore %v after save %v", restored, saved)
	}
	again := complete()
	if again.Timings.CacheN == 0 {
		t.Error("cache_n 0 after restoring the slot")
	}
	if again.Content != first.Content {
		t.Errorf("content after restore %q, before %q", again.Content, first.Content)
	}

	status, _, body := do(t, "GET", ts.URL+"/slots", "", nil)
	if status != 200 {
		t.Fatalf("slots: %d %s", status, body)
	}
	slot := decodeAny(t, []byte(body)).([]any)[0]
	compareShape(t, "engine slot", decodeAny(t, loadCapture(t, "slots_after").respBody).([]any)[0], slot)
	if got := lookup(t, slot, "n_prompt_tokens"); got != float64(again.TokensCached) {
		t.Errorf("n_prompt_tokens %v, want %d", got, again.TokensCached)
	}
}

// TestSlotSaveLongName: every name validFilename accepts can be saved and restored (the
// temporary file beside it must not need a longer name).
func TestSlotSaveLongName(t *testing.T) {
	b := enginetest.Load(t, "models", "stories260K.gguf")
	dir := t.TempDir()
	srv := New(Config{Alias: "stories260K", SlotSavePath: dir}, testLogger())
	srv.SetBackend(b)
	h := srv.Handler()
	for _, n := range []int{240, 250, 255} {
		name := strings.Repeat("n", n-4) + ".bin"
		for _, action := range []string{"save", "restore"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/slots/0?action="+action, strings.NewReader(`{"filename":"`+name+`"}`)))
			if rec.Code != http.StatusOK {
				t.Errorf("%s a %d-byte name: %d %s", action, n, rec.Code, rec.Body)
			}
		}
	}
}

// TestSlotErrorsHideServerPaths: a slot file the server cannot write fails with a message that
// names the file as the client gave it, never the server's directory.
func TestSlotErrorsHideServerPaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "no-such-dir")
	h := newHarnessConfig(t, Config{Alias: "stories260K", SlotSavePath: dir})
	rec := h.do(t, "POST", "/slots/0?action=save", `{"filename":"a.bin"}`)
	wantError(t, rec, http.StatusInternalServerError, "server_error", `failed to save slot 0 to "a.bin": no such file or directory`)
	if strings.Contains(rec.Body.String(), dir) {
		t.Errorf("the error shows the server's directory: %s", rec.Body)
	}
}
