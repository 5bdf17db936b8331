// Package fuzzharness tests .ci/fuzz, the script behind `just fuzz` and CI's fuzzing: that it
// finds every target and that a crash fails the run and is kept as a regression input.
package fuzzharness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// planted is a module with a target that crashes on inputs starting "wgp", which the fuzzer
// must find from a seed that does not: each byte matched opens a branch, so coverage leads it.
// FUNC becomes func when written out, so that .ci/fuzz does not take this file's text for a
// target of this repository.
const planted = `package planted

import "testing"

FUNC FuzzPlanted(f *testing.F) {
	f.Add([]byte("seed"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 3 && b[0] == 'w' {
			if b[1] == 'g' {
				if b[2] == 'p' {
					panic("planted crash")
				}
			}
		}
	})
}
`

func TestFuzzFindsPlantedCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fuzzer")
	}
	script, err := filepath.Abs("../../.ci/fuzz")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"go.mod": "module planted\n\ngo 1.22\n", "planted_test.go": strings.Replace(planted, "FUNC", "func", 1)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(script, "90s", dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the fuzzer did not find the planted crash:\n%s", out)
	}
	if !strings.Contains(string(out), "fuzz: FuzzPlanted in .") || !strings.Contains(string(out), "planted crash") {
		t.Errorf("output lacks the target or the crash:\n%s", out)
	}
	crashes, _ := filepath.Glob(filepath.Join(dir, "testdata", "fuzz", "FuzzPlanted", "*"))
	if len(crashes) != 1 {
		t.Fatalf("%d crash inputs kept, want 1", len(crashes))
	}
	data, err := os.ReadFile(crashes[0])
	if err != nil || !strings.Contains(string(data), "wgp") {
		t.Errorf("crash input %q (%v)", data, err)
	}
	// the kept input fails plain go test: a regression test until fixed
	test := exec.Command("go", "test", "./...")
	test.Dir = dir
	if out, err := test.CombinedOutput(); err == nil || !strings.Contains(string(out), "planted crash") {
		t.Errorf("go test with the crash input kept: %v\n%s", err, out)
	}
}
