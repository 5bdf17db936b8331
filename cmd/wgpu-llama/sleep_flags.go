package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// sleepFlags is llama-server's --sleep-idle-seconds.
type sleepFlags struct {
	idleSeconds int
}

func (f *sleepFlags) register(fs *flag.FlagSet) {
	intVar(fs, &f.idleSeconds, -1, "seconds with no request running or queued after which the server frees the model and its GPU memory, "+
		"loading it again for the next request that needs it (-1: never)", "sleep-idle-seconds")
}

// check rejects 0 and values below -1, as llama-server does.
func (f *sleepFlags) check() error {
	if f.idleSeconds == 0 || f.idleSeconds < -1 {
		return fmt.Errorf("--sleep-idle-seconds must be -1 (never) or a positive number of seconds, got %d", f.idleSeconds)
	}
	return nil
}

// apply sets the engine's idle timeout and, in a router's child process, the state lines it
// reports on stdout (see childStateReporter).
func (f *sleepFlags) apply(cfg *engine.Config, getenv func(string) string, stdout io.Writer) {
	if f.idleSeconds > 0 {
		cfg.SleepIdle = time.Duration(f.idleSeconds) * time.Second
	}
	cfg.OnSleep = childStateReporter(getenv, stdout)
}

// routerChildEnv, set to 1, marks a server started by a router as the process serving one of
// its models. Such a child tells the router its state in lines on stdout, as llama-server's
// children do: cmd_child_to_router:state:{"state":"sleeping"} when it has freed its model and
// cmd_child_to_router:state:{"state":"ready"} when it has loaded it again. (The router defines
// the rest of the protocol.)
const routerChildEnv = "WGPU_LLAMA_ROUTER_CHILD"

// childStateReporter returns the engine's OnSleep for a router's child (nil for any other
// server): each state change is one line, written with a single Write to the unbuffered
// stdout, so the router reads it whole and at once.
func childStateReporter(getenv func(string) string, stdout io.Writer) func(asleep bool) {
	if getenv(routerChildEnv) != "1" {
		return nil
	}
	return func(asleep bool) {
		state := "ready"
		if asleep {
			state = "sleeping"
		}
		_, _ = io.WriteString(stdout, `cmd_child_to_router:state:{"state":"`+state+`"}`+"\n")
	}
}
