# slicemeter — `make demo` and `make test` do all the set-up on a fresh Debian 12 machine (as root).
GO        ?= go
BIN       := bin/slicemeter
SCENARIO  ?= deploy/demo/fleet.yaml
PKGS      := ./...
STATICCHECK := v0.8.2

.PHONY: all build deps demo test test-short lint generate bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/slicemeter

# Installs ClickHouse, Kafka's jars, Prometheus, chDB, protoc… only what is missing.
deps:
	bash deploy/local/install-deps.sh

demo: deps build
	$(BIN) demo --scenario $(SCENARIO) --fast --web.listen-address=127.0.0.1:0

# Everything: lint, unit, integration (real ClickHouse, Kafka, chDB, promtool) and e2e tests.
test: deps lint
	$(GO) test -count=1 -timeout 40m $(PKGS)

# Unit tests only: no real services.
test-short:
	$(GO) test -short -count=1 $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) $(PKGS)

# Regenerates schemas/slicemeterpb from schemas/slicemeter.proto (protoc from Debian's
# protobuf-compiler, protoc-gen-go pinned to the protobuf module version in go.mod).
generate:
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$$($(GO) list -m -f '{{.Version}}' google.golang.org/protobuf)
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc --go_out=. --go_opt=module=github.com/slicemeter/slicemeter schemas/slicemeter.proto

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

clean:
	rm -rf bin
