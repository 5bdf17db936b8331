package cli

import (
	"flag"
	"fmt"
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

// apply sets the engine's idle timeout. (A router's child reports falling asleep and waking
// to the router through the engine's OnSleep: childReporter.sleeping.)
func (f *sleepFlags) apply(cfg *engine.Config) {
	if f.idleSeconds > 0 {
		cfg.SleepIdle = time.Duration(f.idleSeconds) * time.Second
	}
}
