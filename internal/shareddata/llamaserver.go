package shareddata

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"
)

// LlamaServerCompletion runs llama.cpp's own llama-server (the shared build, llama.cpp/ under
// the shared data) on the model at path with a 256-token context and one slot (as the shared
// references were made), POSTs body to /completion and returns the answer. It skips as Path
// does when the shared data is not configured, and fails the test when the server does not
// come up or answers with an error.
func LlamaServerCompletion(tb testing.TB, path, body string) []byte {
	tb.Helper()
	return LlamaServerPost(tb, LlamaServer(tb, path, "-c", "256", "-np", "1"), "/completion", body)
}

// LlamaServer starts llama.cpp's own llama-server on the model at path with args on a free
// loopback port, waits until it is healthy and returns its base URL; it is stopped when the
// test ends. It skips as Path does when the shared data is not configured.
func LlamaServer(tb testing.TB, path string, args ...string) string {
	tb.Helper()
	tool := Path(tb, "llama.cpp", "llama-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var logs bytes.Buffer
	cmd := exec.Command(tool, append([]string{"-m", path, "--host", "127.0.0.1", "--port", fmt.Sprint(port)}, args...)...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("llama-server did not come up:\n%s", logs.Bytes())
		}
	}
}

// LlamaServerPost POSTs a JSON body to path of the llama-server at base and returns the
// answer, failing the test on an error or a status other than 200.
func LlamaServerPost(tb testing.TB, base, path, body string) []byte {
	tb.Helper()
	resp, err := http.Post(base+path, "application/json", bytes.NewBufferString(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("llama-server %s: %v %d %s", path, err, resp.StatusCode, b)
	}
	return b
}
