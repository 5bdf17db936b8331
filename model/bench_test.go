package model_test

import (
	"testing"
)

// BenchmarkDecode measures one-token forward passes (generation) on stories260K, positions
// cycling through the first 256 so the attention length stays realistic.
func BenchmarkDecode(b *testing.B) {
	m := loadB(b)
	kv, err := m.NewKVCache(256)
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Release()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Forward(kv, []int32{403}, i%256); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkPrompt128 measures prompt processing of 128 tokens in one pass.
func BenchmarkPrompt128(b *testing.B) {
	m := loadB(b)
	kv, err := m.NewKVCache(256)
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Release()
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32(3 + i%500)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Forward(kv, prompt, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
