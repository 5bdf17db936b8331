package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// BenchmarkConcurrentStreams measures aggregate generation speed of 1, 2, 4 and 8 streams of
// 64 tokens each on stories260K, every stream in its own slot of one batched engine.
func BenchmarkConcurrentStreams(b *testing.B) {
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			e := enginetest.LoadSlots(b, n, "models", "stories260K.gguf")
			p := engine.DefaultParams()
			p.NPredict, p.IgnoreEOS, p.Seed = 64, true, 1
			total := 0
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				var mu sync.Mutex
				for s := 0; s < n; s++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ch, err := e.Submit(context.Background(), engine.Task{Prompt: []int32{1, int32(300 + s)}, Params: p})
						if err != nil {
							b.Error(err)
							return
						}
						var last engine.Result
						for r := range ch {
							last = r
						}
						mu.Lock()
						total += last.TokensPredicted
						mu.Unlock()
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(total)/time.Since(start).Seconds(), "tokens/s")
		})
	}
}
