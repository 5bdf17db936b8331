package cli

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/charmbracelet/log"
)

// startPprof serves Go's profiles (goroutines, heap, CPU, ...) under /debug/pprof/ on addr, a
// listener of its own so that the API's clients never reach it; it is off unless
// --pprof-addr is given. The returned function stops it.
func startPprof(addr string, logger *log.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	logger.Warn("profiling endpoint on: anyone who reaches it can read the process's state", "at", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() { srv.Close() }, nil
}
