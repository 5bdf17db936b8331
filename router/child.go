package router

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"
)

// The line protocol between the router and a child, as llama-server's: the child writes
// StatePrefix followed by a JSON ChildState on its standard output whenever its state
// changes, and exits when it reads ExitCommand on its standard input (or the input closes).
const (
	StatePrefix = "cmd_child_to_router:state:"
	ExitCommand = "cmd_router_to_child:exit"
)

// Child states a child reports (ChildState.State).
const (
	StateLoading  = "loading"
	StateReady    = "ready"
	StateSleeping = "sleeping"
)

// ChildState is what a child reports on a state line: its state and, while loading, the
// fraction of the model loaded (0 to 1).
type ChildState struct {
	State    string   `json:"state"`
	Progress *float64 `json:"progress,omitempty"`
}

// StateLine is the line a child prints to report st.
func StateLine(st ChildState) string {
	b, _ := json.Marshal(st)
	return StatePrefix + string(b)
}

// child is one running model server process.
type child struct {
	name  string
	port  int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed once the process has exited and its output is read
	code  int           // exit code, valid after done

	stopOnce sync.Once
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startChild starts argv with the child's host and port appended, reports each state line
// to onState and logs every other line of its output under the model's name.
func startChild(name string, argv []string, onState func(ChildState), logger *log.Logger) (*child, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("no free port for %s: %w", name, err)
	}
	args := append(append([]string{}, argv[1:]...), "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	cmd := exec.Command(argv[0], args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the child for %s: %w", name, err)
	}
	c := &child{name: name, port: port, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	clog := logger.With("model", name, "port", port)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if js, ok := strings.CutPrefix(line, StatePrefix); ok {
				var st ChildState
				if err := json.Unmarshal([]byte(js), &st); err != nil {
					clog.Warn("bad state line from child", "line", line)
					continue
				}
				onState(st)
				continue
			}
			clog.Info(line)
		}
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			clog.Print(sc.Text())
		}
	}()
	go func() {
		wg.Wait() // Wait closes the pipes: read them to the end first
		err := cmd.Wait()
		c.code = 0
		if err != nil {
			c.code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				c.code = ee.ExitCode()
			}
		}
		close(c.done)
	}()
	return c, nil
}

// stop asks the child to exit and kills it when it has not after timeout; with timeout 0
// it kills at once (a child still loading cannot answer).
func (c *child) stop(timeout time.Duration) {
	c.stopOnce.Do(func() {
		if timeout <= 0 {
			c.kill()
			return
		}
		fmt.Fprintln(c.stdin, ExitCommand)
		go func() {
			select {
			case <-c.done:
			case <-time.After(timeout):
				c.kill()
			}
		}()
	})
}

// kill ends the process now.
func (c *child) kill() {
	if c.cmd.Process != nil {
		c.cmd.Process.Kill()
	}
}
