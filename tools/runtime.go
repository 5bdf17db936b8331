package tools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A runtime is where tools run other than the host, named as llama-server names them:
//   - "docker-container:ID", "podman-container:ID": a running container, through `ENGINE exec`;
//   - "apptainer-instance:NAME": a running apptainer instance;
//   - "ssh:[USER@]HOST": a host reached over ssh (remoting, not isolation);
//   - "docker:IMAGE", "podman:IMAGE", "apptainer:IMAGE": only --tools-runtime, a container the
//     server starts and owns (Runtime).
//
// A request's x-tool-runtime header may name only running ones: a header never makes the server
// pull or start anything. Names that could parse as command-line options are refused.

// engines are the container engines and what attaching to a running one is called.
var engines = []struct{ bin, attach string }{{"docker", "container"}, {"podman", "container"}, {"apptainer", "instance"}}

// containerSpec is a parsed container runtime: an engine and an image to start, or the id of
// a running container to attach to.
type containerSpec struct {
	bin, arg string
	attach   bool
}

// parseContainer parses the container forms of a runtime spec; ok is false for other forms.
func parseContainer(spec string) (containerSpec, bool) {
	for _, e := range engines {
		if rest, ok := strings.CutPrefix(spec, e.bin+"-"+e.attach+":"); ok {
			return containerSpec{bin: e.bin, arg: rest, attach: true}, true
		}
		if rest, ok := strings.CutPrefix(spec, e.bin+":"); ok {
			return containerSpec{bin: e.bin, arg: rest}, true
		}
	}
	return containerSpec{}, false
}

// validID reports whether id can name a container and not be read as an option (--privileged).
func validID(id string) bool {
	return id != "" && isAlnum(id[0]) && alnumOr(id, "._-")
}

// validSSHTarget reports whether target can name an ssh host and not be read as an option
// (-oProxyCommand=... would run a command on the server).
func validSSHTarget(target string) bool {
	return target != "" && target[0] != '-' && alnumOr(target, "._-@")
}

// alnumOr reports whether s holds only ASCII letters, digits and bytes of extra.
func alnumOr(s, extra string) bool {
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && strings.IndexByte(extra, s[i]) < 0 {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// RuntimeError is a runtime spec that cannot be used (500, as llama-server answers it).
type RuntimeError struct{ Msg string }

func (e *RuntimeError) Error() string { return e.Msg }

// openRuntime returns the I/O of a running runtime, refusing specs that would start one.
func openRuntime(spec, cwd string) (fileIO, error) {
	if c, ok := parseContainer(spec); ok {
		if !c.attach {
			return nil, &RuntimeError{"tool runtime must name a running container or instance: " + spec}
		}
		if !validID(c.arg) {
			return nil, &RuntimeError{"invalid container id: " + c.arg}
		}
		return &isolateIO{cwd: cwd, wrap: containerArgv(c.bin, c.arg)}, nil
	}
	if target, ok := strings.CutPrefix(spec, "ssh:"); ok {
		if !validSSHTarget(target) {
			return nil, &RuntimeError{"invalid ssh target: " + target}
		}
		return &isolateIO{cwd: cwd, wrap: sshArgv(target)}, nil
	}
	return nil, &RuntimeError{"unknown tool runtime: " + spec}
}

// containerArgv runs a command in a running container or instance.
func containerArgv(bin, id string) func(inner []string, stdin bool) []string {
	return func(inner []string, stdin bool) []string {
		argv := []string{bin, "exec"}
		if bin == "apptainer" {
			// apptainer forwards stdin by itself; --pwd: the host's directory is not mounted
			argv = append(argv, "--pwd", "/tmp", "instance://"+id)
		} else {
			if stdin {
				argv = append(argv, "-i")
			}
			argv = append(argv, id)
		}
		return append(argv, inner...)
	}
}

// sshArgv runs a command on an ssh host: key authentication only, with a host key the
// administrator trusted beforehand (there is nobody to answer a prompt).
func sshArgv(target string) func(inner []string, stdin bool) []string {
	return func(inner []string, stdin bool) []string {
		argv := []string{"ssh", "-o", "BatchMode=yes", "-o", "PasswordAuthentication=no", "-o", "KbdInteractiveAuthentication=no", "-o", "StrictHostKeyChecking=yes"}
		if !stdin {
			argv = append(argv, "-n")
		}
		// The remote shell parses the command line again, so it travels as one quoted word.
		return append(argv, target, shellQuote(inner))
	}
}

// shellQuote joins argv into one string a POSIX shell parses back into argv.
func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// Runtime is the --tools-runtime every call without an x-tool-runtime header runs in: a running
// target (checked once at startup) or a container started from an image, owned by the server,
// started again if it dies, and removed by Close.
type Runtime struct {
	spec   string         // a running target's spec, fixed
	image  *containerSpec // the image to start, for an owned container
	mu     sync.Mutex
	cmd    *exec.Cmd // `ENGINE run --rm -i IMAGE sh`, whose open stdin keeps the container up
	stdin  interface{ Close() error }
	exited chan struct{}
	id     string
}

// NewRuntime checks spec and, for an "ENGINE:IMAGE" spec, starts the container.
func NewRuntime(spec string) (*Runtime, error) {
	if c, ok := parseContainer(spec); ok && !c.attach {
		if c.arg == "" {
			return nil, fmt.Errorf("--tools-runtime %s:<image> requires an image name", c.bin)
		}
		if strings.HasPrefix(c.arg, "-") {
			return nil, fmt.Errorf("invalid image: %s", c.arg)
		}
		r := &Runtime{image: &c}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.start(); err != nil {
			return nil, err
		}
		return r, nil
	}
	if _, err := openRuntime(spec, ""); err != nil {
		return nil, err
	}
	return &Runtime{spec: spec}, nil
}

// Spec is the spec of the running target calls go to, starting the owned container again if it
// died.
func (r *Runtime) Spec() (string, error) {
	if r.image == nil {
		return r.spec, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.alive() {
		if err := r.start(); err != nil {
			return "", err
		}
	}
	kind := "-container:"
	if r.image.bin == "apptainer" {
		kind = "-instance:"
	}
	return r.image.bin + kind + r.id, nil
}

func (r *Runtime) alive() bool {
	if r.image.bin == "apptainer" {
		res := runCommand(context.Background(), []string{"apptainer", "exec", "--pwd", "/tmp", "instance://" + r.id, "true"}, "", nil, 4096, isolateTimeout, true, nil)
		return res.exitCode == 0 && !res.timedOut
	}
	select {
	case <-r.exited:
		return false
	default:
		return r.cmd != nil
	}
}

// start starts the owned container (r.mu held).
func (r *Runtime) start() error {
	bin, image := r.image.bin, r.image.arg
	if bin == "apptainer" {
		r.stopInstance()
		name := fmt.Sprintf("llama-tools-%x", time.Now().UnixNano())
		res := runCommand(context.Background(), []string{bin, "instance", "start", "--containall", "--writable-tmpfs", image, name}, "", nil, 16<<10, 2*time.Minute, true, nil)
		if res.exitCode != 0 || res.timedOut {
			return fmt.Errorf("failed to start apptainer instance (image: %s): %s", image, res.output)
		}
		r.id = name
		return nil
	}
	r.closeContainer()
	cidfile := filepath.Join(os.TempDir(), "wgpu-llama-tools-cid-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	cmd := exec.Command(bin, "run", "--rm", "-i", "--cidfile", cidfile, image, "sh")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to spawn %s container for tools runtime (image: %s): %w", bin, image, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer os.Remove(cidfile)
	for i := 0; i < 100; i++ {
		if b, err := os.ReadFile(cidfile); err == nil && strings.TrimSpace(string(b)) != "" {
			r.cmd, r.stdin, r.exited, r.id = cmd, stdin, exited, strings.TrimSpace(string(b))
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the %s container for the tools runtime exited at start (image: %s)", bin, image)
		case <-time.After(100 * time.Millisecond):
		}
	}
	cmd.Process.Kill()
	return fmt.Errorf("timed out waiting for %s container to start (image: %s)", bin, image)
}

// closeContainer ends the owned docker or podman container: its shell exits when its stdin
// closes, and --rm removes it.
func (r *Runtime) closeContainer() {
	if r.cmd == nil {
		return
	}
	r.stdin.Close()
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-r.exited
	}
	r.cmd = nil
}

func (r *Runtime) stopInstance() {
	if r.id != "" {
		runCommand(context.Background(), []string{"apptainer", "instance", "stop", r.id}, "", nil, 4096, isolateTimeout, true, nil)
		r.id = ""
	}
}

// Close stops and removes an owned container.
func (r *Runtime) Close() error {
	if r == nil || r.image == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.image.bin == "apptainer" {
		r.stopInstance()
	} else {
		r.closeContainer()
	}
	return nil
}
