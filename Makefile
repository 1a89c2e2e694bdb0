# hone: two commands on a fresh machine — `make run` and `make test`.
GO       ?= go
BIN      := bin/hone
PKGS     := ./...
NODE_DIRS := acceptance examples scripts/js
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
# No GOAMD64 level: kernels/cpu picks its AVX2/FMA assembly or generic Go at
# run time, so one binary runs on any x86-64 (HONE_KERNELS forces a variant).

.PHONY: all build build-static build-cuda run test test-long test-go test-crash test-short-crash deps bench-deps bench bench-proxy bench-translate bench-kernels bench-gpu lint fuzz demo tiny-model clean peers soak

all: build

# With cgo (the default) hone reaches NVML through go-nvml, which loads the
# driver's libnvidia-ml at run time; the binary links glibc dynamically.
# -v names each package as it compiles: the first build (about two minutes
# on two cores) shows its progress; a cached build prints nothing.
build:
	@echo "building $(BIN) (the first build compiles every dependency: about 2 minutes on 2 cores)"
	$(GO) build -v -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hone

# One fully static binary (CGO_ENABLED=0): everything but NVML, which then
# reports "no GPU".
build-static:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hone

# hone with the real CUDA backend (-tags cuda) as bin/hone-cuda: the toolkit
# from NVIDIA's PyPI wheels, the kernels compiled by nvcc, linked against
# libcudart and cuBLAS. No GPU needed to build; run 'bin/hone-cuda selftest
# --backend cuda' on one.
build-cuda:
	bash scripts/cuda/build.sh

# Starts hone on the embedded default: embedded CPU engine + tiny model +
# Badger in ./data. Prints where it listens and a ready-to-paste curl.
run: build
	./$(BIN) serve $(ARGS)

# npm packages for the wire-level acceptance tests and the example agents
# (installed from package-lock.json; skipped where a folder has none).
# A folder is reinstalled when its lock file is newer than what npm last
# installed (node_modules/.package-lock.json), so a moved version is picked up.
# --loglevel=error: the packages ask for Node >= 22 and npm warns (EBADENGINE,
# dozens of lines) when the system's Node is older, but the tests run them
# with the Node 24 each folder installs (the npm package "node").
# npm ci refuses a lock file that lacks optional dependencies the registry
# does not serve (the coding CLIs' binaries for other platforms, absent from
# the mirror CI uses); npm install --no-save then installs the same pinned
# versions from the lock without rewriting it.
# bench-deps (below) needs no root: it prints the apt command where it cannot
# install.
deps: bench-deps
	@for d in $(NODE_DIRS); do \
		if [ -f $$d/package-lock.json ] && { [ ! -f $$d/node_modules/.package-lock.json ] || \
			[ $$d/package-lock.json -nt $$d/node_modules/.package-lock.json ]; }; then \
			echo "npm ci in $$d"; (cd $$d && { npm ci --no-audit --no-fund --loglevel=silent || \
				{ echo "npm ci refused the lock file of $$d (optional packages the registry lacks): npm install --no-save"; \
				npm install --no-save --no-audit --no-fund --loglevel=error; }; }) || exit 1; \
		fi; \
	done

# All tests: Go unit, fault, fuzz-seed, parity (when python3-torch is
# present), acceptance with the real OpenAI npm client, and the short
# crash test.
test: deps
	@echo "make test: go vet, then every package's tests (about 7 minutes on 2 cores with warm caches; each package"
	@echo "prints its line when it ends; the longest are kernels/cuda (~3.5 min) and peers (real vLLM starts, ~3 min))"
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 30m $(PKGS)

# The long suites, which .ci/run runs after make test (about 22 minutes on
# 2 cores): the crash test with 100 kills, all 16 CUDA mutants (make test
# runs 6), AgentScope learning through hone + its own vLLM with guarded
# rollouts (about 2 minutes), 2 minutes of soak at 500 calls/s, and the
# fuzz targets make fuzz lists, 20-30 s each.
test-long: build
	$(GO) test -race -count=1 -timeout 20m ./capture ./proxy/... ./internal/...
	HONE_CRASH_ROUNDS=100 $(GO) test -count=1 -run TestCrash -timeout 30m ./capture/crashtest/
	HONE_TEST_LONG=1 $(GO) test -count=1 -run '^TestMutantsFail$$' -timeout 30m ./kernels/cuda/
	HONE_TEST_LONG=1 $(GO) test -count=1 -run '^(TestAgentScopeLearnsWithGuardedRollout|TestCacheSaltPoolingThroughHone)$$' -timeout 20m ./peers/
	$(GO) run ./bench/soak -hone $(BIN) -duration 2m
	$(MAKE) fuzz

test-go:
	$(GO) test $(PKGS)

# Long crash test: hone serve killed with SIGKILL many times under load.
test-crash:
	HONE_CRASH_ROUNDS=100 $(GO) test -count=1 -run TestCrash -v -timeout 30m ./capture/crashtest/

# Soak: hone serve (default configuration) in front of a stub engine under
# mixed traffic at 500 calls/s (streams, rewards through headers and
# endpoints, a trainer acknowledging), RSS, goroutines and errors every 30 s;
# fails on any error or RSS over 512 MiB. SOAK=2m for a shorter run (make
# test runs 20 s of it: bench/soak TestSoakShort).
SOAK ?= 30m
soak: build
	$(GO) run ./bench/soak -hone $(BIN) -duration $(SOAK)

bench:
	$(GO) test -run XXX -bench . -benchtime 2s ./proxy/ ./capture/ ./kernels/... ./model/ ./engine/ ./trainer/...
	@echo "bench/proxy: see bench/RESULTS.md for the load-generator comparison (make bench-proxy)"

# nginx and HAProxy, the baselines of make bench-proxy, from Debian
# (nginx-light, haproxy) where missing: installed as root or with sudo that
# needs no password; otherwise the apt command is printed and bench-proxy
# skips them (with HONE_BENCH_REQUIRE=1 both fail instead).
BENCH_APT_CHECK = command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$$missing nginx-light"; \
	command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing="$$missing haproxy"
bench-deps:
	@missing=""; $(BENCH_APT_CHECK); \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=no; fi; \
	if [ "$$SUDO" != no ] && command -v apt-get >/dev/null 2>&1; then \
		echo "bench-deps: apt-get install$$missing (the baselines of make bench-proxy)"; \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null 2>&1 || \
			{ $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; }; \
	fi; \
	missing=""; $(BENCH_APT_CHECK); \
	[ -z "$$missing" ] && exit 0; \
	echo "bench-deps: not installed:$$missing; make bench-proxy skips them. Install with: sudo apt-get install -y$$missing"; \
	[ "$$HONE_BENCH_REQUIRE" != 1 ]

# The recorded tables: direct, nginx, HAProxy, hone capture off, capture on
# and hone serve, interleaved in five rounds of every section, then hone's
# figures as ratios of nginx's (about 5 minutes). ARGS='-targets ...' adds
# the other baselines (relay, fasthttp, httputil).
bench-proxy: build bench-deps
	$(GO) run ./bench/proxy -duration 2s -count 5 $(ARGS)

# The translation of a coding agent's Messages and Responses calls to the
# engine's chat request, hone's beside LiteLLM's (a venv under
# ~/.cache/hone, made on first use), three rounds.
bench-translate:
	GO=$(GO) bash bench/translate/run.sh

# Matmul GFLOP/s of kernels/cpu beside numpy/OpenBLAS and PyTorch (when
# present: ARGS='-torch /path/to/python') on hone's shapes, with the FMA peak.
bench-kernels:
	$(GO) run ./bench/kernels $(ARGS)

# LoRA-step tokens/s and MFU on a GPU for Qwen3-0.6B and 8B shapes (random
# weights, nothing downloaded). Where nvidia-smi exists it is built with
# -tags cuda (scripts/cuda/build.sh) and run; elsewhere it runs without the
# tag and prints "not measured: no GPU" (exit 0).
# ARGS='-backend emulated -tiny' checks the program end to end on the host.
bench-gpu:
	@if command -v nvidia-smi >/dev/null 2>&1; then \
		bash scripts/cuda/build.sh -o bin/gpu-bench ./bench/gpu && bin/gpu-bench $(ARGS); \
	else \
		$(GO) run ./bench/gpu $(ARGS); \
	fi

# The GPU bundle: dist/hone-gpu-<version>-linux-amd64.tar.gz with hone, the
# device tests and bench/gpu built with -tags cuda, libcudart as a fallback,
# the transformers + PEFT anchor and run.sh, which on a GPU host with only a
# driver and the CUDA 13 libraries runs the selftest, the device tests, the
# bench, a per-kernel profile and the anchor (scripts/gpu/README.md). Built
# here without a GPU (about a minute with nvcc's objects cached, 3 when it
# recompiles the kernels, on 2 cores); it ends by unpacking the tarball and
# checking that its run.sh refuses cleanly when there is no GPU.
.PHONY: gpu-bundle
gpu-bundle:
	bash scripts/gpu/bundle.sh

lint:
	@files=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$files" ]; then echo "gofmt needed: $$files"; exit 1; fi
	$(GO) vet $(PKGS)
	@command -v staticcheck >/dev/null 2>&1 || $(GO) install honnef.co/go/tools/cmd/staticcheck@latest
	$$($(GO) env GOPATH)/bin/staticcheck $(PKGS)

fuzz:
	GO=$(GO) scripts/fuzz/run.sh FuzzRewrite ./proxy 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzSSE ./proxy 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzReader ./proxy/internal/sse 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzResponse ./proxy 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzAccumulateWalk ./proxy 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzPlainFloat ./internal/jsonwalk 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzValid ./internal/jsonwalk 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzPlainRun ./internal/jsonwalk 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzAsString ./internal/jsonwalk 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzAppendInt32s ./internal/jsonwalk 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzWalkInt32s ./internal/jsonwalk 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzTokenizeReply ./proxy 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzResponsesRequest ./proxy 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzResponsesWalk ./proxy 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzResponsesStream ./proxy 30s -fuzzminimizetime 200x
	GO=$(GO) scripts/fuzz/run.sh FuzzMessagesRequest ./proxy 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzMessagesWalk ./proxy 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzObjectGet ./proxy 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzMessagesStream ./proxy 30s -fuzzminimizetime 200x
	GO=$(GO) scripts/fuzz/run.sh FuzzRedactHead ./proxy 30s -fuzzminimizetime 200x
	GO=$(GO) scripts/fuzz/run.sh FuzzRedactError ./proxy 30s -fuzzminimizetime 200x
	GO=$(GO) scripts/fuzz/run.sh FuzzLoRAAdapter ./engine 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzTokenize ./engine 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzStructTag ./engine 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzCompileSchema ./engine/internal/grammar 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzGenerationConfig ./engine 30s -fuzzminimizetime 5s
	GO=$(GO) scripts/fuzz/run.sh FuzzGenerationEOS ./model/tokenizer 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzLoad ./config 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzConversationHashes ./capture 30s
	GO=$(GO) scripts/fuzz/run.sh FuzzCarries ./capture 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzCanonArgs ./capture 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzAppendString ./internal/jsonenc 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzAppendRaw ./internal/jsonenc 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzEncoded ./internal/jsonenc 20s
	GO=$(GO) scripts/fuzz/run.sh FuzzAppendLiteral ./internal/jsonenc 30s

demo: build
	./$(BIN) demo $(ARGS)

tiny-model: build
	./$(BIN) demo prepare --out testdata/tiny-model

clean:
	rm -rf bin data

# The peers' Python environment (vLLM on the CPU, transformers, PEFT, torch,
# openai, agentscope, pyarrow, pandas) from scripts/peers/requirements.lock,
# in a virtualenv outside the clone ($${HONE_PEERS_DIR:-~/.cache/hone/peers});
# installs only when missing or when the lock changed. Prints its Python last.
peers:
	@bash scripts/peers/ensure.sh
