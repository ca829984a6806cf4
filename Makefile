# slicemeter — `make demo` and `make test` do all the set-up on a fresh Debian 12 machine (as root):
# `make demo` installs only what the demo starts (ClickHouse; its Kafka broker is in-process),
# `make test` everything the tests start or call as well.
GO        ?= go
BIN       := bin/slicemeter
# The exporter alone (-tags exporter_only): what a GPU node runs, without the database,
# Parquet and attribution code of the other commands (exporter/README.md).
EXPORTER_BIN := bin/slicemeter-exporter
SCENARIO  ?= deploy/demo/fleet.yaml
PKGS      := ./...
STATICCHECK := v0.8.2
# go-nvml's cgo wrappers call NVML functions the header marks deprecated: gcc's ~100 lines of
# warnings about them would be the first thing a fresh `make demo` prints. Go's default flags
# otherwise; the environment's CGO_CFLAGS wins.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

# What `slicemeter --version` and slicemeter_build_info report (prometheus/common/version);
# a plain `go build ./cmd/slicemeter` leaves them to the Go build info.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null)
BUILD_USER ?= $(shell id -un 2>/dev/null)@$(shell hostname 2>/dev/null)
BUILD_DATE ?= $(shell date -u +%Y%m%d-%H:%M:%S)
VERSION_PKG := github.com/prometheus/common/version
LDFLAGS   := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION) \
             -X $(VERSION_PKG).Branch=$(BRANCH) -X $(VERSION_PKG).BuildUser=$(BUILD_USER) \
             -X $(VERSION_PKG).BuildDate=$(BUILD_DATE)

.PHONY: all build build-exporter deps deps-demo demo test test-short lint generate bench clean device-build device-check

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/slicemeter

build-exporter:
	$(GO) build -tags exporter_only -ldflags "$(LDFLAGS)" -o $(EXPORTER_BIN) ./cmd/slicemeter

# What the tests start or call: the demo's ClickHouse, and Kafka's and ZooKeeper's jars (Java,
# Maven), Prometheus/promtool, Alertmanager, chDB, protoc, etcd, kube-apiserver, helm, Chromium,
# the FOCUS validator… only what is missing. `bash deploy/local/install-deps.sh --list` lists it.
deps:
	bash deploy/local/install-deps.sh test

# What `slicemeter demo` starts: ClickHouse alone (the broker is kfake, in the process). No
# test-only tool may appear here: deploy/local's TestInstallDepsDemo checks `make -n demo`.
deps-demo:
	bash deploy/local/install-deps.sh demo

demo: deps-demo build
	$(BIN) demo --scenario $(SCENARIO) --fast --web.listen-address=127.0.0.1:0

# Everything: lint, unit, integration (real ClickHouse, Kafka, chDB, promtool) and e2e tests.
# deploy/local/testrun is go test that runs a package's failed tests once more when a server
# under them crashed (ClickHouse 18.16 segfaults now and then); any other failure fails.
test: deps lint
	GO=$(GO) $(GO) run ./deploy/local/testrun -count=1 -timeout 40m -- $(PKGS)

# Unit tests only: no real services.
test-short:
	$(GO) test -short -count=1 $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags exporter_only $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) -tags exporter_only $(PKGS)

# Regenerates schemas/slicemeterpb from schemas/slicemeter.proto (protoc from Debian's
# protobuf-compiler, protoc-gen-go pinned to the protobuf module version in go.mod).
generate:
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$$($(GO) list -m -f '{{.Version}}' google.golang.org/protobuf)
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc --go_out=. --go_opt=module=github.com/slicemeter/slicemeter schemas/slicemeter.proto

# Go benchmarks, then the collector against ClickHouse's Kafka engine on a real broker: the last
# line is "ingest: N samples/s; clickhouse kafka engine: …; ratio R".
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -skip IngestVsKafkaEngine $(PKGS)
	@mkdir -p bin
	$(GO) test -run '^$$' -bench IngestVsKafkaEngine -benchtime 1x -benchmem -timeout 15m ./collector | tee bin/ingest-bench.txt
	@grep '^ingest:' bin/ingest-bench.txt | tail -1

# The binary the device check runs on a GPU machine that has the driver but no Go: x86-64, cgo
# (go-nvml loads libnvidia-ml.so.1 at run time), glibc ≥ 2.34.
device-build:
	CGO_ENABLED=1 GOOS=linux GOARCH=amd64 $(GO) build -ldflags="-s -w $(LDFLAGS)" -o bin/slicemeter-device ./cmd/slicemeter

# The exporter against this machine's real NVML for 30 s at 100 ms under a PyTorch load; records
# a capture, compares with nvidia-smi, prints a summary (deploy/device/README.md). Needs no Go:
# build bin/slicemeter-device elsewhere with `make device-build` and bring bin/ along.
device-check:
	bash deploy/device/check.sh

# The Helm chart's copies of alerts/ and dashboards/json, and the plain manifests rendered
# from it (deploy/kubernetes); the tests of deploy/helm fail when they are stale.
.PHONY: chart image
chart:
	$(GO) generate ./deploy/helm

# The container images (deploy/image/Dockerfile): the full binary, and the exporter alone
# (target exporter) that the chart's DaemonSet runs. Need a Docker engine, which the machines
# that run `make test` do not have: nothing runs these targets there.
IMAGE ?= ghcr.io/slicemeter/slicemeter:$(VERSION)
EXPORTER_IMAGE ?= ghcr.io/slicemeter/slicemeter-exporter:$(VERSION)
IMAGE_ARGS = -f deploy/image/Dockerfile --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) --build-arg BRANCH=$(BRANCH)
image:
	docker build $(IMAGE_ARGS) -t $(IMAGE) .
	docker build $(IMAGE_ARGS) --target exporter -t $(EXPORTER_IMAGE) .

clean:
	rm -rf bin
