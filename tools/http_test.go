package tools

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/log"
)

func request(t *testing.T, h http.Handler, method, body string, header map[string]string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, "/tools", strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, strings.TrimSpace(string(b))
}

func TestHandlerOff(t *testing.T) {
	for _, m := range []string{"GET", "POST"} {
		code, body := request(t, Handler(nil, log.New(io.Discard)), m, `{"tool":"read_file"}`, nil)
		if code != 403 || body != `{"error":{"message":"this feature is disabled","type":"feature_disabled"}}` {
			t.Errorf("%s: %d %s", m, code, body)
		}
	}
}

func TestHandlerList(t *testing.T) {
	set, _ := NewSet([]string{"get_info", "write_file"})
	code, body := request(t, Handler(set, log.New(io.Discard)), "GET", "", nil)
	if code != 200 {
		t.Fatal(code, body)
	}
	want := `[{"definition":{"function":{"description":"Write content to a file, creating it (including parent directories) if it does not exist. May use with edit_file for more complex edits.","name":"write_file","parameters":{"properties":{"content":{"description":"Content to write","type":"string"},"path":{"description":"Path of the file to write","type":"string"}},"required":["path","content"],"type":"object"}},"type":"function"},"display_name":"Write file","permissions":{"write":true},"tool":"write_file","type":"builtin","uses_cwd":true},` +
		`{"definition":{"function":{"description":"Returns runtime info: the OS name/version and the current working directory","name":"get_info","parameters":{"properties":{},"type":"object"}},"type":"function"},"display_name":"Get Runtime Info","permissions":{"write":false},"tool":"get_info","type":"builtin","uses_cwd":true}]`
	if body != want {
		t.Errorf("GET /tools\n%s\nwant\n%s", body, want)
	}
}

func TestHandlerCall(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "marker.txt"), []byte("marker\n"), 0o644)
	set, _ := NewSet([]string{"all"})
	h := Handler(set, log.New(io.Discard))
	// x-tool-cwd wins over a "cwd" in params, which is just another parameter
	code, body := request(t, h, "POST", `{"tool":"read_file","params":{"path":"marker.txt","cwd":"/nowhere"}}`, map[string]string{"X-Tool-Cwd": dir})
	if code != 200 || body != `{"plain_text_response":"marker\n"}` {
		t.Errorf("read: %d %s", code, body)
	}
	for _, c := range []struct {
		body, header string
		code         int
		want         string
	}{
		{`{"tool":"nope"}`, "", 404, `{"error":{"code":404,"message":"unknown tool \"nope\"","type":"invalid_request_error"}}`},
		{`{"tool":"read_file","stream":true}`, "", 404, `{"error":{"code":404,"message":"tool \"read_file\" does not support stream = true","type":"invalid_request_error"}}`},
		{`{"tool":"read_file","params":{}}`, "", 400, `{"error":{"code":400,"message":"missing parameter \"path\"","type":"invalid_request_error"}}`},
		{`{"params":{}}`, "", 400, `{"error":{"code":400,"message":"missing \"tool\": the name of the tool to run","type":"invalid_request_error"}}`},
		{`{"tool":`, "", 400, `{"error":{"code":400,"message":"invalid JSON body: unexpected EOF","type":"invalid_request_error"}}`},
		{`{"tool":"exec_shell_command","params":{"command":"echo hi"}}`, "fake:x", 500, `{"error":{"code":500,"message":"unknown tool runtime: fake:x","type":"server_error"}}`},
		{`{"tool":"read_file","params":{"path":"missing"}}`, "", 200, `{"error":"cannot stat file: missing"}`},
	} {
		code, body := request(t, h, "POST", c.body, map[string]string{"X-Tool-Runtime": c.header, "X-Tool-Cwd": dir})
		if code != c.code || body != c.want {
			t.Errorf("%s: %d %s, want %d %s", c.body, code, body, c.code, c.want)
		}
	}
}

func TestHandlerStream(t *testing.T) {
	set, _ := NewSet([]string{"exec_shell_command"})
	srv := httptest.NewServer(Handler(set, log.New(io.Discard)))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"tool":"exec_shell_command","params":{"command":"echo hello; sleep 0.1; echo again"},"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("content type %q", resp.Header.Get("Content-Type"))
	}
	var text strings.Builder
	events := strings.Split(strings.TrimSpace(string(b)), "\n\n")
	for _, e := range events[:len(events)-1] {
		var v struct{ Chunk string }
		if err := json.Unmarshal([]byte(strings.TrimPrefix(e, "data: ")), &v); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		text.WriteString(v.Chunk)
	}
	if text.String() != "hello\nagain\n\n[exit code: 0]" || events[len(events)-1] != `data: {"done":true}` {
		t.Errorf("stream %q", b)
	}
}
