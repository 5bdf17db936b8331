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

// fakeGo is a go command that answers `go test -fuzz` as Go 1.26's coordinator does when its
// -fuzztime deadline races a worker (golang/go#75804); KEEP makes it also keep an input, as a
// real crash would.
const fakeGo = `#!/bin/sh
echo "fuzz: elapsed: 0s, gathering baseline coverage: 0/1 completed"
echo "fuzz: elapsed: 3s, execs: 1000 (333/sec), new interesting: 0 (total: 1)"
if [ -n "$KEEP" ]; then
  mkdir -p testdata/fuzz/FuzzPlanted && echo kept > testdata/fuzz/FuzzPlanted/0123
fi
echo "--- FAIL: FuzzPlanted (3.02s)"
echo "    context deadline exceeded"
echo "FAIL"
echo "exit status 1"
echo "FAIL	planted	3.031s"
exit 1
`

// TestFuzzDeadlineRace: the coordinator's own deadline with nothing kept is not a crash; the same
// message with an input kept is.
func TestFuzzDeadlineRace(t *testing.T) {
	script, err := filepath.Abs("../../.ci/fuzz")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, keep := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "planted_test.go"), []byte(strings.Replace(planted, "FUNC", "func", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(script, "3s", dir)
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		if keep {
			cmd.Env = append(cmd.Env, "KEEP=1")
		}
		out, err := cmd.CombinedOutput()
		switch {
		case !keep && err != nil:
			t.Errorf("the deadline race alone failed the run: %v\n%s", err, out)
		case !keep && !strings.Contains(string(out), "golang/go#75804"):
			t.Errorf("the run does not say why it let the failure pass:\n%s", out)
		case keep && err == nil:
			t.Errorf("a kept input did not fail the run:\n%s", out)
		}
	}
}
