# wgpu-llama tasks. Shared test data (models, reference outputs) lives beside the repository.

export WGPU_LLAMA_SHARED := env_var_or_default("WGPU_LLAMA_SHARED", parent_directory(justfile_directory()) / "shared")

# Start the server on stories260K from the shared data, with its web UI; extra flags pass
# through (a later -m picks another model).
serve *ARGS:
    go run ./cmd/wgpu-llama -m "$WGPU_LLAMA_SHARED/models/stories260K.gguf" {{ARGS}}

# Start a router (many models, each loaded on demand) over the shared models, with the web UI;
# extra flags pass through (--models-dir, --models-preset, --models-max ...).
router *ARGS:
    go run ./cmd/wgpu-llama --models-dir "$WGPU_LLAMA_SHARED/models" {{ARGS}}

# Build the binary into ./wgpu-llama.
build:
    go build -o wgpu-llama ./cmd/wgpu-llama

# The desktop app: the server on stories260K in a window with the live GPU debug view; extra
# flags pass through (every flag of the server, --screenshot FILE --after N).
desktop *ARGS:
    go run ./cmd/wgpu-llama-desktop -m "$WGPU_LLAMA_SHARED/models/stories260K.gguf" {{ARGS}}

# Pack what .ci/device-bench needs on a lent GPU machine into .device/ (git-ignored): our binary
# (stripped), llama.cpp's Vulkan llama-bench from the shared data, and the Debian packages of the
# libraries they load, for a machine without them. Then run it there with carry [".device"].
device-bundle:
    rm -rf .device && mkdir -p .device/pack/llama.cpp .device/debs
    go build -ldflags "-s -w" -o .device/pack/wgpu-llama ./cmd/wgpu-llama
    cp -a "$WGPU_LLAMA_SHARED/llama.cpp/vulkan/." .device/pack/llama.cpp/
    cd .device/debs && apt-get download libvulkan1 libgomp1 libssl3
    tar -cJf .device/bundle.tar.xz -C .device/pack . && rm -rf .device/pack
    du -sh .device

# Check deploy/ in its own Go module: every manifest under deploy/kubernetes decoded strictly into
# the real Kubernetes, Gateway API and inference extension types, the references between them, the
# Endpoint Picker's config against the server's /metrics, and deploy/Containerfile. -count=1: the
# tests build and run the server, which Go's test cache does not see.
deploy-check:
    cd deploy/validate && go test -count=1 ./...

# The whole test suite: gofmt, vet, all tests (GPU ones on software Vulkan; the kernels' again with
# wgpu's runtime checks), race detector on CPU-only packages.
test:
    @test -z "$(gofmt -l $(git ls-files '*.go' | grep -v '^gen/'))" || { echo "gofmt needed:"; gofmt -l $(git ls-files '*.go' | grep -v '^gen/'); exit 1; }
    go vet ./...
    go test -race ./gguf/... ./model/tokenizer/... ./model/chat/... ./model/reference/... ./engine/grammar/... ./shaders/... ./server/... ./tools/... ./mcpservers/... ./corsproxy/... ./mcpendpoint/...
    go test -count=1 ./...
    WGPU_LLAMA_CHECKED_SHADERS=1 go test -count=1 ./gpu/
    xvfb-run -a go test -count=1 -run Window ./gpu/canvas
    just llama-server-tests
    just webui-test

# Run every Go fuzz target for TIME each; a crash is kept in its package's testdata/fuzz/ as a
# regression input (.ci/fuzz).
fuzz TIME="20s":
    .ci/fuzz {{TIME}}

# llama.cpp's own llama-server test suite (../shared/llama-server-tests) against a fresh build;
# fails when a test of .ci/llama-server-tests.txt (the ones we pass so far) fails.
llama-server-tests *ARGS: build
    LLAMA_SERVER_TESTS_EXPECT={{justfile_directory()}}/.ci/llama-server-tests.txt "$WGPU_LLAMA_SHARED/llama-server-tests/run" ./wgpu-llama {{ARGS}}

# Regenerate gen/ from openapi/openapi.yaml with the ogen version pinned in go.mod.
gen:
    go generate ./openapi/

# Fail when gen/ differs from what the spec generates.
check-gen: gen
    git diff --exit-code --stat -- gen/
    @test -z "$(git status --porcelain -- gen/)" || { echo "gen/ has untracked generated files"; git status --porcelain -- gen/; exit 1; }

# Install the TypeScript client's pinned tools (clients/typescript/package-lock.json).
ts-deps:
    cd clients/typescript && npm ci --silent --no-audit --no-fund --prefer-offline

# Regenerate the TypeScript client's types (clients/typescript/src/schema.d.ts) from openapi/openapi.yaml.
ts-client: ts-deps
    cd clients/typescript && npm run --silent generate

# Fail when the TypeScript types differ from what the spec generates; type-check and test the client.
# (npm test compiles with tsc under the settings of `npm run typecheck`, so one tsc run does both.)
check-ts: ts-client
    git diff --exit-code --stat -- clients/typescript/src/schema.d.ts
    @test -z "$(git status --porcelain -- clients/typescript/src/schema.d.ts)" || { echo "clients/typescript/src/schema.d.ts is not committed"; exit 1; }
    cd clients/typescript && npm test --silent

# List GPU adapters.
devices:
    go run ./cmd/wgpu-llama devices

# Install the web UI's pinned dependencies (webui/package-lock.json), and the TypeScript
# client's, which the UI imports from its sources.
webui-deps: ts-deps
    cd webui && npm ci --silent --no-audit --no-fund --prefer-offline

# Build the web UI into webui/dist, which the binary embeds; prints the first-load size.
webui: webui-deps
    cd webui && npm run --silent build

# Fail when the committed webui/dist differs from what the sources build.
check-webui: webui
    git diff --exit-code --stat -- webui/dist
    @test -z "$(git status --porcelain -- webui/dist)" || { echo "webui/dist has files not committed"; git status --porcelain -- webui/dist; exit 1; }

# The web UI's type check and unit tests, then its browser tests (Debian's chromium) against a
# fresh build of the binary, which embeds webui/dist.
webui-test: build webui-deps
    cd webui && npm run --silent check
    cd webui && npm test --silent
    cd webui && WGPU_LLAMA_BIN={{justfile_directory()}}/wgpu-llama npm run --silent e2e
