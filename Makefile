# neighwatch: `make run` runs the agent, `make test` runs every test.
GO       ?= go
BIN      := bin/neighwatch
# The version lives in one place, the VERSION file: the binary, build_info
# and the image tag all take it from there.
VERSION  ?= $(shell cat VERSION)
REVISION ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BRANCH   ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
# promu's fields, in prometheus/common/version: neighwatch_build_info and
# `neighwatch version` show them. The date is the commit's, so a rebuild
# of the same commit is the same binary.
BUILD_DATE ?= $(shell git log -1 --format=%cd --date=format:%Y%m%d-%H:%M:%S 2>/dev/null || echo unknown)
BUILD_USER ?= $(shell id -un)@$(shell hostname 2>/dev/null || echo unknown)
IMAGE    ?= ghcr.io/neighwatch/neighwatch:$(VERSION)
PODMAN   ?= podman
PCV      := github.com/prometheus/common/version
LDFLAGS  := -X $(PCV).Version=$(VERSION) -X $(PCV).Revision=$(REVISION) -X $(PCV).Branch=$(BRANCH) \
            -X $(PCV).BuildDate=$(BUILD_DATE) -X $(PCV).BuildUser=$(BUILD_USER)
ARGS     ?=

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
UNPARAM     := mvdan.cc/unparam@v0.0.0-20260823230713-2fa3d841b0c8
# The chart's tools, pinned as the linters are (internal/dev/manifests names
# the same helm).
HELM          := helm.sh/helm/v3/cmd/helm@v3.21.4
# helm-unittest's go.mod has a replace directive, so go run cannot build it
# by version: make chart builds it in its own module, in the module cache.
HELM_UNITTEST := github.com/helm-unittest/helm-unittest@v1.1.2
# make publish's: the release files as an OCI artefact, and the signatures.
ORAS          := oras.land/oras/cmd/oras@v1.3.6
COSIGN        := github.com/sigstore/cosign/v3/cmd/cosign@v3.1.3
CYCLONEDX     := github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
CHART         := deploy/helm/neighwatch
# The architectures of the image and of the release binaries.
ARCHES        := amd64 arm64
# Every package: the product's module (.) and the tooling's modules of
# go.work (the end-to-end tests, the manifests, the kernel matrix), which
# ./... alone does not reach.
PKGS          := ./... ./e2e/... ./internal/dev/kernels/... ./internal/dev/manifests/...
# Pure packages whose tests run on arm64 under qemu-user (make arm64).
ARM64_TESTS   := ./table/ ./monitor/evidence/ ./metrics/ ./internal/control/ ./remediate/ ./cmd/neighwatch/
# The agent's option and configuration-file tests (internal/agent's others
# need the kernel).
ARM64_AGENT   := ^(TestConfig|TestOption|TestFlag|TestNewLogger|TestREADMEFlag|TestInert|TestDaemonSet)

.PHONY: print-pkgs kernels-readme test-go fuzz publish push mutation rules all deps build run test unit unit-all vet lint cross fmt-check generate check-generate \
        checkrules bench bench-root lab-up lab-down clean image manifests install demo test-kernels test-kernels-more \
        chart arm64 release test-cluster

all: build

deps:
	./scripts/install-deps.sh

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/neighwatch

# The release binaries (static, one per architecture in ARCHES), their
# SHA256SUMS and an SBOM (CycloneDX) of what they are built from, in
# bin/release.
release:
	mkdir -p bin/release
	for a in $(ARCHES); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" \
	    -o bin/release/neighwatch-linux-$$a ./cmd/neighwatch || exit 1; \
	done
	$(GO) run $(CYCLONEDX) app -json -licenses=false -main cmd/neighwatch -output bin/release/neighwatch.cdx.json .
	cd bin/release && sha256sum neighwatch-linux-* neighwatch.cdx.json > SHA256SUMS

# The container image the DaemonSet runs: the static binary on scratch,
# for amd64 and arm64 in one manifest list tagged with VERSION (never
# latest). Needs podman (scripts/install-deps.sh installs it); no network
# and no emulation: the base is empty and each platform copies its own
# binary.
image: release
	-$(PODMAN) manifest rm $(IMAGE) >/dev/null 2>&1
	-$(PODMAN) image rm $(IMAGE) >/dev/null 2>&1
	$(PODMAN) manifest create $(IMAGE)
	for a in $(ARCHES); do \
	  $(PODMAN) build --platform linux/$$a --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) \
	    --manifest $(IMAGE) -f Containerfile bin/release || exit 1; \
	done

# Publishes a release to the registry REGISTRY (host[:port][/path]), each
# part signed with cosign and the key COSIGN_KEY (cosign generate-key-pair;
# its password in COSIGN_PASSWORD):
#   REGISTRY/neighwatch/neighwatch:VERSION  the image list (amd64, arm64)
#   oci://REGISTRY/neighwatch/charts/neighwatch, version VERSION: the chart,
#       its image.registry REGISTRY and image.digest the list's, so that
#       it installs the image it was published with
#   REGISTRY/neighwatch/release:VERSION  an OCI artefact of the release
#       files: both binaries, the SBOM and SHA256SUMS (oras pull fetches
#       them)
# The signatures go to the registry beside each part (cosign's
# sha256-<digest>.sig tags); verify with cosign verify --key cosign.pub.
# COSIGN_FLAGS' default keeps the signatures out of the public
# transparency log and cosign off the network (verify with
# --insecure-ignore-tlog). A signing config naming no service does the
# same but still fetches Sigstore's trusted root first (a warning here,
# where that host cannot be reached), so the default is the two flags
# cosign v3 deprecates for it. Set it empty to sign with Sigstore's
# public services.
# Log in first (podman login, helm registry login, cosign login).
# TLS_VERIFY=false for a registry on plain HTTP (a local one).
# push does the same with the image make image already built.
REGISTRY     ?=
TLS_VERIFY   ?= true
COSIGN_KEY   ?=
COSIGN_FLAGS ?= --use-signing-config=false --tlog-upload=false
PLAIN_HTTP    = $(if $(filter false,$(TLS_VERIFY)),--plain-http)
RELEASE_FILES = $(foreach a,$(ARCHES),neighwatch-linux-$(a)) neighwatch.cdx.json SHA256SUMS
publish: image push

push:
	@if [ -z "$(REGISTRY)" ]; then echo "make push: set REGISTRY=host[:port][/path], the registry to push to" >&2; exit 2; fi
	@if [ -z "$(COSIGN_KEY)" ] || [ ! -r "$(COSIGN_KEY)" ]; then echo "make push: set COSIGN_KEY to a cosign private key (cosign generate-key-pair; its password in COSIGN_PASSWORD): what is published is signed" >&2; exit 2; fi
	@rm -rf bin/publish && mkdir -p bin/publish/chart
	$(PODMAN) manifest push --all --tls-verify=$(TLS_VERIFY) --digestfile bin/publish/image.digest $(IMAGE) docker://$(REGISTRY)/neighwatch/neighwatch:$(VERSION)
	cp -r $(CHART) bin/publish/chart/
	sed -i -e 's#^  registry: ghcr.io$$#  registry: $(REGISTRY)#' -e "s#^  digest: \"\"\$$#  digest: \"$$(cat bin/publish/image.digest)\"#" bin/publish/chart/neighwatch/values.yaml
	@grep -qx '  registry: $(REGISTRY)' bin/publish/chart/neighwatch/values.yaml && grep -qx "  digest: \"$$(cat bin/publish/image.digest)\"" bin/publish/chart/neighwatch/values.yaml || \
	  { echo "make push: the chart's values.yaml has no image.registry ghcr.io and empty image.digest to point at REGISTRY: mend the sed above" >&2; exit 1; }
	$(GO) run $(HELM) package bin/publish/chart/neighwatch --destination bin/publish
	$(GO) run $(HELM) push bin/publish/neighwatch-$(VERSION).tgz oci://$(REGISTRY)/neighwatch/charts $(PLAIN_HTTP)
	cd bin/release && $(GO) run $(ORAS) push $(PLAIN_HTTP) $(REGISTRY)/neighwatch/release:$(VERSION) \
	  --artifact-type application/vnd.neighwatch.release.v1 $(RELEASE_FILES)
	$(GO) run $(ORAS) resolve $(PLAIN_HTTP) $(REGISTRY)/neighwatch/charts/neighwatch:$(VERSION) >bin/publish/chart.digest
	$(GO) run $(ORAS) resolve $(PLAIN_HTTP) $(REGISTRY)/neighwatch/release:$(VERSION) >bin/publish/release.digest
	for ref in neighwatch/neighwatch@$$(cat bin/publish/image.digest) neighwatch/charts/neighwatch@$$(cat bin/publish/chart.digest) \
	  neighwatch/release@$$(cat bin/publish/release.digest); do \
	  $(GO) run $(COSIGN) sign --yes --key $(COSIGN_KEY) $(COSIGN_FLAGS) $(if $(PLAIN_HTTP),--allow-http-registry) $(REGISTRY)/$$ref || exit 1; \
	done

# The failure and its repair on a lab of namespaces, narrated (as root,
# under two minutes); it removes all it made, on Ctrl-C too.
demo: deps build
	$(GO) build -o bin/nwdemo ./internal/dev/lab/cmd/nwdemo
	./bin/nwdemo --neighwatch $(BIN)

# The binary, the systemd unit and its EnvironmentFile (kept if it
# exists) under DESTDIR (default /): then systemctl enable --now neighwatch.
DESTDIR ?=
PREFIX  ?= /usr/local
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/neighwatch
	install -D -m 0644 deploy/systemd/neighwatch.service $(DESTDIR)/etc/systemd/system/neighwatch.service
	sed -i 's#/usr/local/bin/neighwatch#$(PREFIX)/bin/neighwatch#' $(DESTDIR)/etc/systemd/system/neighwatch.service
	@if [ ! -e $(DESTDIR)/etc/default/neighwatch ]; then \
	  install -D -m 0644 deploy/systemd/neighwatch.default $(DESTDIR)/etc/default/neighwatch; fi

# deploy/prometheus/alerts.yml from the monitoring mixin (deploy/mixin/, at its
# defaults), deploy/kubernetes/prometheusrule.yaml from it, and the
# chart's and the mixin's copies of the rules and the dashboard.
manifests:
	$(GO) run ./internal/dev/manifests/cmd/genrule

# Runs the agent on defaults. It needs root (or CAP_NET_ADMIN and
# CAP_NET_RAW); without them it still mirrors the table and serves metrics
# and logs one line for each part it disabled.
run: deps build
	@if [ "$$(id -u)" -ne 0 ]; then echo "make run: not root: ARP listeners and the control socket need root (or CAP_NET_ADMIN, CAP_NET_RAW); starting anyway" >&2; fi
	./$(BIN) agent $(ARGS)

# The whole suite, privileged tests included (run as root; CI=true turns
# would-be skips of privileged tests into failures), and the kernel
# matrix: scripts/test.sh runs the checks and go test $(PKGS) in one lane
# and the kernel matrix, one emulated guest at a time, in another, side
# by side, and prints each phase's time. KERNELS= as for test-kernels.
test: deps
	KERNELS=$(KERNELS) BLIND="$(BLIND)" PKGS="$(PKGS)" ./scripts/test.sh

# The host's tests alone (the boot test of internal/dev/kernels included).
test-go:
	$(GO) test -count=1 -timeout 40m $(PKGS)

# Every fuzz target, FUZZTIME each on one worker, past the seeds and the
# committed corpora (testdata/fuzz) that go test runs: the config file,
# the control API, ARP/NDP frames, netlink messages, tracer records.
# make test runs it; a finding fails it and is written under testdata.
FUZZTIME ?= 10s
FUZZ_TARGETS = ./internal/agent:FuzzConfigFile ./internal/control:FuzzHandler \
               ./monitor/evidence:FuzzParseARP ./monitor/evidence:FuzzParseNDP \
               ./monitor/mirror:FuzzDecode ./monitor/neightbl:FuzzDecode ./bpf:FuzzDecodeTransition
# A target that fails with only "context deadline exceeded" and writes no
# failing input hit Go's fuzzing coordinator race at the -fuzztime
# boundary (golang/go#51484), not a finding: it runs once more.
fuzz:
	@for t in $(FUZZ_TARGETS); do \
	  for try in 1 2; do \
	    echo "fuzz $$t for $(FUZZTIME)"; \
	    out=$$($(GO) test -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) -parallel 1 "$${t%%:*}" 2>&1); rc=$$?; \
	    echo "$$out"; \
	    [ $$rc -eq 0 ] && break; \
	    if [ $$try -eq 1 ] && echo "$$out" | grep -q '^    context deadline exceeded$$' && ! echo "$$out" | grep -q 'Failing input written'; then \
	      echo "fuzz $$t: the coordinator's deadline race, no input written: once more"; continue; fi; \
	    exit 1; \
	  done; \
	done

# The mutation score of the decision code (table, remediate,
# monitor/evidence, the metrics' classes), with gremlins, judged against
# docs/mutants.md; out of make test (about an hour on 2 CPUs). TARGETS=
# to run fewer (table,remediate,evidence,metrics).
TARGETS ?=
mutation:
	$(GO) run ./internal/dev/mutation/cmd/nwmutants run --targets "$(TARGETS)"

# The rule ledger (docs/rules.md): each rule's break applied alone (go
# test -overlay), its tests run against it; fails when a break survives,
# no longer applies or builds, or a named test does not run. make test
# runs it (as root: some rules' tests are privileged). ONLY= a comma-
# separated list of rule IDs to check fewer.
ONLY ?=
rules:
	$(GO) run ./internal/dev/mutation/cmd/nwmutants rules --only "$(ONLY)"

# The kernel-contract tests on Debian's kernels (fetched from the Debian
# archive this machine uses, booted under qemu) and on this machine's
# kernel; prints a table of what each kernel gives, as root and as the
# DaemonSet and the systemd unit run the agent. make test boots KERNELS
# (amd64 5.10 and the newest of trixie-backports, and arm64 6.12);
# test-kernels-more boots the others (amd64 6.1 and 6.12, arm64 5.10 and 6.1)
# and runs the blind control in BLIND_MORE (the moved host with the
# tracer's counting refused must fail), and .ci/run runs both. BLIND=
# names kernels of KERNELS that run it too. KERNELS=6.1 to boot fewer;
# kernels and results stay in .kernels/.
KERNELS      ?= 5.10,arm64-6.12,newest
KERNELS_MORE ?= 6.1,6.12,arm64-5.10,arm64-6.1
BLIND        ?=
BLIND_MORE   ?= arm64-5.10
HOST         ?= full
test-kernels: deps
	$(GO) run ./internal/dev/kernels/cmd/nwkernels run --kernels $(KERNELS) --blind "$(BLIND)" --host $(HOST) --readme docs/kernels.md

# A run checks docs/kernels.md's kernel table and leaves its own in
# .kernels/readme-table.md; this writes that into docs/kernels.md (a test run
# writes no tracked file).
kernels-readme:
	$(GO) run ./internal/dev/kernels/cmd/nwkernels readme --readme docs/kernels.md

# The kernels make test does not boot: CI runs them after make test.
test-kernels-more: deps
	$(GO) run ./internal/dev/kernels/cmd/nwkernels run --kernels $(KERNELS_MORE) --blind "$(BLIND_MORE)" --host none --readme docs/kernels.md

# The chart on a real single-node Kubernetes (internal/dev/cluster):
# etcd, the API server, the controller manager, the scheduler and the
# kubelet built from Kubernetes' modules into one executable (cached in
# .cluster), Debian's containerd, all in a network namespace and a mount
# namespace of the node's own; then Helm 4 and Helm 3 install the chart
# from the registry make push publishes to, and the scenarios of
# e2e/cluster_*_test.go run. The host is checked to be as it was found.
# As root; .ci/run runs it after make test.
test-cluster: deps
	$(GO) test -tags cluster -count=1 -timeout 60m -run '^TestCluster$$' -v ./e2e/

# Tests any user can run: privileged ones skip with their reason (unless
# CI=true, where they fail instead). unit is the edit-test loop: the
# product's module alone, so it builds none of the tooling modules'
# dependencies (Helm, Kubernetes' types, jsonnet); unit-all runs every
# module's.
unit:
	$(GO) test -count=1 -short ./...

unit-all:
	$(GO) test -count=1 -short $(PKGS)

# The cluster's tests (make test-cluster) are behind the build tag
# cluster: vetted and linted with it.
vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags cluster ./e2e/

# The package patterns of every module, for go commands by hand:
# go test $$(make -s print-pkgs)
print-pkgs:
	@echo $(PKGS)

lint:
	$(GO) run $(STATICCHECK) $(PKGS)
	$(GO) run $(STATICCHECK) -tags cluster ./e2e/
	$(GO) run $(UNPARAM) $(PKGS)

# The pure parts build on any OS; Linux-only code lives in _linux.go
# files. The product builds and vets for linux/arm64 (Graviton, Ampere).
# The product's module only: the tooling's modules run on the Linux
# machine that runs the tests. They add 84 packages to the 362 a darwin
# build compiles, the Kubernetes types among them, and this phase took
# 558 s of make test from a cold build cache beside a busy loop.
CROSS_PKGS := ./...
cross:
	GOOS=darwin $(GO) build $(CROSS_PKGS)
	GOOS=darwin $(GO) vet $(CROSS_PKGS)
	GOOS=linux GOARCH=arm64 $(GO) build $(CROSS_PKGS)
	GOOS=linux GOARCH=arm64 $(GO) vet $(CROSS_PKGS)

# The arm64 binary runs (its version) and the pure packages' tests pass
# on arm64, under Debian's qemu-user.
arm64:
	mkdir -p bin/arm64
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -ldflags "$(LDFLAGS)" -o bin/arm64/neighwatch ./cmd/neighwatch
	qemu-aarch64 bin/arm64/neighwatch version
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) test -count=1 -short -exec qemu-aarch64 $(ARM64_TESTS)
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) test -count=1 -short -exec qemu-aarch64 -run '$(ARM64_AGENT)' ./internal/agent/

# The Helm chart's unit tests (helm-unittest, tests/ in the chart); lint,
# the render of every ci/*-values.yaml and its equality with
# deploy/kubernetes are internal/dev/manifests' tests.
chart:
	@mkdir -p bin
	$(GO) mod download $(HELM_UNITTEST)
	cd "$$($(GO) env GOMODCACHE)/$(HELM_UNITTEST)" && $(GO) build -o $(CURDIR)/bin/helm-unittest ./cmd/helm-unittest
	./bin/helm-unittest $(CHART)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on: $$out" >&2; exit 1; fi

# Regenerates the eBPF objects with clang (bpf2go).
generate:
	$(GO) generate ./bpf/... ./internal/dev/bench/progs/... ./internal/dev/lab/fwd/...

# Fails when the committed eBPF objects differ from a fresh build.
check-generate:
	@if [ -n "$$(ls bpf/*.c 2>/dev/null)" ]; then \
		$(MAKE) --no-print-directory generate && \
		git diff --exit-code --stat -- bpf/ internal/dev/bench/progs/ internal/dev/lab/fwd/ && \
		test -z "$$(git status --porcelain -- bpf/ internal/dev/bench/progs/ internal/dev/lab/fwd/)" || { git status --short -- bpf/ internal/dev/bench/progs/ internal/dev/lab/fwd/; echo "generated eBPF objects are out of date or uncommitted: run make generate and commit" >&2; exit 1; }; \
	fi

checkrules:
	@if [ -f deploy/prometheus/alerts.yml ]; then \
		promtool check rules deploy/prometheus/alerts.yml && \
		promtool test rules deploy/prometheus/alerts_test.yml; \
	fi

# Go benchmarks of the pure code; BENCHMARKS.md has the method of each run.
bench:
	mkdir -p .bench
	$(GO) test -run '^$$' -bench 'Apply|Stats|Decode' -benchmem -count 6 ./table/ ./monitor/mirror/ | tee .bench/go-bench.txt

# The privileged runs (root): 100k-entry sync/memory/scrape, event drain,
# forwarding with and without the tracer, datapath decisions.
bench-root: build
	mkdir -p .bench
	$(GO) build -o bin/nwbench ./internal/dev/bench/cmd/nwbench
	./bin/nwbench run --rounds 11 --entries 1000,100000 --bin 'bin/neighwatch,bin/neighwatch@--tracer=off' | tee .bench/sync-100k.txt
	$(GO) test ./monitor/mirror -run '^$$' -bench DrainInterleaved -benchtime 7x | tee .bench/drain.txt
	NEIGHWATCH_BENCH_OUT=$(CURDIR)/.bench/forwarding.txt $(GO) test ./bpf -run '^$$' -bench 'Forwarding$$' -benchtime 11x
	NEIGHWATCH_BENCH_OUT=$(CURDIR)/.bench/forwarding-sampled.txt $(GO) test ./bpf -run '^$$' -bench ForwardingSampled -benchtime 5x -timeout 60m
	$(GO) test ./e2e -run '^$$' -bench DetectionLatency -benchtime 1x -timeout 30m | tee .bench/detection.txt
	$(GO) test ./bpf -run '^$$' -bench Decision -benchtime 2000x -count 5 | tee .bench/decision.txt

lab-up:
	$(GO) run ./internal/dev/lab/cmd/nwlab up

lab-down:
	$(GO) run ./internal/dev/lab/cmd/nwlab down

clean:
	rm -rf bin .bench .kernels
