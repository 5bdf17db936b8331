package cli

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestCompleteSpeculative runs complete with the model drafting for itself (both flag
// spellings) and with n-gram drafting: stdout is the plain greedy output, and stderr reports
// the acceptance rate.
func TestCompleteSpeculative(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	requireGPU(t)
	base := []string{"complete", "-m", path, "-p", "Once upon a time", "-n", "32", "--temp", "0", "-c", "256"}
	const want = " Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw\n\n"
	for _, extra := range [][]string{
		{"-md", path, "--draft-max", "8", "--draft-min", "1", "--draft-p-min", "0.5"},
		{"--model-draft", path, "--spec-draft-n-max", "4", "--spec-draft-p-min", "0"},
		{"--spec-type", "ngram-simple", "--spec-ngram-size-n", "2"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), append(base, extra...), &stdout, &stderr); err != nil {
			t.Fatalf("%q: %v\n%s", extra, err, stderr.String())
		}
		if stdout.String() != want {
			t.Errorf("%q: stdout %q\nwant %q", extra, stdout.String(), want)
		}
		m := regexp.MustCompile(`draft acceptance rate=(\S+) accepted=(\d+) drafted=(\d+)`).FindStringSubmatch(stderr.String())
		if m == nil {
			t.Errorf("%q: no acceptance line on stderr:\n%s", extra, stderr.String())
			continue
		}
		if extra[0] != "--spec-type" && (m[1] != "1.000" || m[2] != m[3]) {
			t.Errorf("%q: self-drafting should accept every draft: %s", extra, m[0])
		}
	}
}

func TestSpeculativeFlagErrors(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--spec-type", "draft-simple"}, "needs a draft model (-md)"},
		{[]string{"--spec-type", "ngram-cache"}, `unknown speculative type "ngram-cache"`},
		{[]string{"-md", path, "--draft-max", "0"}, "the draft maximum must be at least 1"},
		{[]string{"-md", path, "--draft-p-min", "2"}, "between 0 and 1"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"complete", "-m", path, "-p", "x"}, tc.args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
