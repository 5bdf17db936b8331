package cli

// Graceful shutdown, in llama-server's manner: the first SIGINT or SIGTERM drains the server,
// a second one exits at once ("Received second interrupt, terminating immediately.").

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/server"
)

// drainTimeout is how long the running requests get to finish after the first signal (a
// variable for tests).
var drainTimeout = 10 * time.Second

// cutGrace is how long, once the drain timed out and the engine ended what still ran, the
// handlers get to send that ending (a stream's error event) before the connections close.
const cutGrace = time.Second

// errForced is run's error when a second signal cut the drain short (exit status 1).
var errForced = errors.New("a second interrupt: exiting without waiting for the running requests")

// forceKey carries, in the context of a command, the channel a second signal closes.
type forceKey struct{}

// withForce returns ctx carrying force, a channel closed when the command must stop at once.
func withForce(ctx context.Context, force <-chan struct{}) context.Context {
	return context.WithValue(ctx, forceKey{}, force)
}

// forced is the channel of withForce, or nil (never closed) when ctx has none.
func forced(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(forceKey{}).(<-chan struct{})
	return ch
}

// signalContext returns a context cancelled by the first SIGINT or SIGTERM, whose forced channel
// the second closes; stop releases the signals.
func signalContext() (context.Context, func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	force := make(chan struct{})
	go func() {
		if _, ok := <-sigs; !ok {
			return
		}
		cancel()
		if _, ok := <-sigs; ok {
			close(force)
		}
	}()
	return withForce(ctx, force), func() {
		signal.Stop(sigs)
		close(sigs)
		cancel()
	}
}

// stoppedWhileLoading is runServe's result for err, a failure to find or load the model: nil
// (exit status 0) when it only reports the shutdown that a signal asked for meanwhile.
func stoppedWhileLoading(ctx context.Context, logger *log.Logger, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		logger.Info("shut down while loading the model")
		return nil
	}
	return err
}

// drain shuts the server down once ctx is done: resumable streams end (with their shutdown
// event), queued requests get their 503 at once, and the running ones have drainTimeout to
// finish, after which they are ended (streams with an error event). It returns nil after a
// clean drain, errForced when a second signal (forced(ctx)) cut it short, and an error naming
// the timeout when requests were still running then.
func drain(ctx context.Context, logger *log.Logger, srv *server.Server, eng *engine.Engine, httpSrv *http.Server) error {
	logger.Info("shutting down: finishing the running requests; a second Ctrl-C or SIGTERM exits at once", "timeout", drainTimeout)
	// Resumable streams generate detached from their clients: stop them, or Shutdown would
	// wait on their followers.
	srv.Close()
	eng.Drain()
	shutCtx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	cut := make(chan struct{})
	go func() {
		select {
		case <-forced(ctx):
			close(cut)
			cancel()
		case <-shutCtx.Done():
		}
	}()
	err := httpSrv.Shutdown(shutCtx)
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	select {
	case <-cut:
		httpSrv.Close()
		return errForced
	default:
	}
	// The engine ends the generations still running with ErrClosed, which their handlers send
	// as the end of the response (a stream's error event, 503 "the server is shutting down");
	// then whatever still holds a connection is cut.
	eng.Close()
	grace, cancelGrace := context.WithTimeout(context.Background(), cutGrace)
	defer cancelGrace()
	_ = httpSrv.Shutdown(grace)
	httpSrv.Close()
	return fmt.Errorf("shutdown: requests still running after %s were ended", drainTimeout)
}
