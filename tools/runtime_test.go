package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRuntimeSpecsRefused(t *testing.T) {
	for spec, want := range map[string]string{
		"fake:does-not-exist":                 "unknown tool runtime: fake:does-not-exist",
		"ssh:-oProxyCommand=touch /tmp/pwned": "invalid ssh target: -oProxyCommand=touch /tmp/pwned",
		"ssh:user@host;rm":                    "invalid ssh target: user@host;rm",
		"docker-container:--privileged":       "invalid container id: --privileged",
		"podman-container:--privileged":       "invalid container id: --privileged",
		"apptainer-instance:-x":               "invalid container id: -x",
		"docker:busybox":                      "tool runtime must name a running container or instance: docker:busybox",
	} {
		set, _ := NewSet([]string{"exec_shell_command"})
		_, err := set.Run(context.Background(), "exec_shell_command", Call{Params: map[string]any{"command": "touch /tmp/should-not-exist"}, Runtime: spec})
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", spec, err, want)
		}
	}
	for spec, want := range map[string]string{
		"docker:":         "--tools-runtime docker:<image> requires an image name",
		"podman:--rm":     "invalid image: --rm",
		"ssh:-oX":         "invalid ssh target: -oX",
		"kubernetes:pod1": "unknown tool runtime: kubernetes:pod1",
	} {
		if _, err := NewRuntime(spec); err == nil || err.Error() != want {
			t.Errorf("--tools-runtime %s: %v, want %q", spec, err, want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	if got := shellQuote([]string{"sh", "-c", "echo 'a b'", "_"}); got != `'sh' '-c' 'echo '\''a b'\''' '_'` {
		t.Errorf("quoted %s", got)
	}
	argv := sshArgv("me@host")([]string{"cat", "--", "/x y"}, false)
	if want := "ssh -o BatchMode=yes -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no -o StrictHostKeyChecking=yes -n me@host 'cat' '--' '/x y'"; strings.Join(argv, " ") != want {
		t.Errorf("ssh argv %q", argv)
	}
}

// fakeDocker is a container engine that runs everything on the host: `exec [-i] ID CMD...`
// logs the id and runs CMD, and `run ... --cidfile F IMAGE sh` logs its start, then writes an
// id (the runtime may exec at once) and reads its stdin as the container's shell would.
const fakeDocker = `#!/bin/sh
case "$1" in
exec) shift; [ "$1" = "-i" ] && shift; echo "$1" >> "$FAKE_DOCKER_LOG"; shift; exec "$@";;
run) while [ "$1" != "--cidfile" ]; do shift; done; echo started >> "$FAKE_DOCKER_LOG"; echo fakecid123 > "$2"; exec sh;;
esac
exit 2
`

// A --tools-runtime container is started once, every tool goes through its `exec` (the
// isolate's helper commands: test, wc, cat, mkdir, find, timeout), and Close ends it.
func TestContainerRuntime(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(fakeDocker), 0o755); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(t.TempDir(), "log")
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_DOCKER_LOG", logFile)
	rt, err := NewRuntime("docker:busybox")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := rt.Spec()
	if err != nil || spec != "docker-container:fakecid123" {
		t.Fatalf("spec %q %v", spec, err)
	}
	set, _ := NewSet([]string{"all"})
	set.Runtime = rt
	dir := t.TempDir()
	call := func(name string, params map[string]any) Result {
		t.Helper()
		res, err := set.Run(context.Background(), name, Call{Params: params, Cwd: dir})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	if res := call("write_file", map[string]any{"path": "sub/a.txt", "content": "hello container\n"}); res["result"] != "file written successfully" {
		t.Fatalf("write: %v", res)
	}
	if got := call("read_file", map[string]any{"path": "sub/a.txt"}).Text(); got != "hello container\n" {
		t.Errorf("read %q", got)
	}
	if got := call("exec_shell_command", map[string]any{"command": "cat sub/a.txt"}).Text(); got != "hello container\n\n[exit code: 0]" {
		t.Errorf("exec %q", got)
	}
	if got := call("file_glob_search", map[string]any{"path": ".", "type": "all"}).Text(); got != "sub/\nsub/a.txt\n\n---\nTotal matches: 2\n" {
		t.Errorf("glob %q", got)
	}
	if got := call("grep_search", map[string]any{"path": ".", "pattern": "container"}).Text(); got != "sub/a.txt:hello container\n\n---\nTotal matches: 1\n" {
		t.Errorf("grep %q", got)
	}
	if got := call("get_info", nil); got["cwd"] != dir {
		t.Errorf("info %v", got)
	}
	rt.Close()
	b, _ := os.ReadFile(logFile)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != "started" || len(lines) < 8 {
		t.Fatalf("engine log %q", lines)
	}
	for _, l := range lines[1:] {
		if l != "fakecid123" {
			t.Errorf("a command ran outside the container: %q", l)
		}
	}
	if rt.alive() {
		t.Error("the container is still up after Close")
	}
}
