# loader: make targets. Only Go is needed; modules and tools are fetched by the go command.
GO       ?= go
BIN      := bin/loader
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
PKGS     := ./...

# The demo dataset: generated (deterministically), never committed.
DEMO_DIR  ?= testdata/demo
DEMO_ROWS ?= 1000000

.PHONY: all check build test test-short soak vet lint fmt-check tidy-check bench fuzz demo testdata clean versitygw bench-objects test-emulators

all: check build

## build: compile bin/loader with its version stamped in
build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/loader

## check: what a reviewer runs before merging (lint includes fmt-check)
check: fmt-check vet lint test

## versitygw: the S3-compatible server (Apache-2.0) the object-store tests run on loopback, built once
## into bin/ (tests skip, saying so, only when it cannot be built)
VERSITYGW_VERSION := v1.8.0
VERSITYGW         := bin/versitygw
versitygw: $(VERSITYGW)
$(VERSITYGW):
	@mkdir -p bin
	GOBIN=$(CURDIR)/bin $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION) || \
	  echo "versitygw $(VERSITYGW_VERSION) could not be built: the object-store tests will skip"

## test: the full test suite with the race detector (what CI runs)
test: versitygw
	$(GO) test -race -count=1 -timeout 14m $(PKGS)

## test-short: the suite without the race detector, for a quick local loop
test-short:
	$(GO) test -count=1 -short $(PKGS)

## soak: about 10 minutes of loads into the embedded sink under random faults (loader and sink
## SIGKILLs, connection cuts, held acks), resumed each time; checks every id is loaded exactly once and
## the loader's peak RSS, and prints the figures (make test runs a 20 s version). SOAK=30m for longer.
SOAK ?= 10m
soak:
	LOADER_SOAK=$(SOAK) $(GO) test -count=1 -timeout 60m -run '^TestSoak$$' -v ./cmd/loader/

vet:
	$(GO) vet $(PKGS)

## lint: golangci-lint (pinned; config in .golangci.yml: vet, staticcheck, errcheck, import layering)
GOLANGCI_LINT := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
lint: fmt-check
	$(GO) run $(GOLANGCI_LINT) run ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

tidy-check:
	$(GO) mod tidy -diff

## bench: go benchmarks of the hot paths, then `loader bench` (streams sweep, ceilings, rivals) on a
## small dataset into BENCH_OUT (long; not part of test)
BENCH_FLAGS ?= --rows 500000 --files 4 --streams 1,2,4,8 --repeat 2
BENCH_OUT   ?= bench-results
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./partitioner/ ./schemamatch/ ./warehouse/ ./sink/
	$(BIN) bench $(BENCH_FLAGS) --out $(BENCH_OUT)

## fuzz: a short run of every fuzz target (FUZZTIME each). A run that fails with nothing but the
## engine's "context deadline exceeded" at the end of FUZZTIME, and writes no failing input, is the
## fuzzing engine's own flake (golang/go#51484) and is reported, not failed; anything else fails.
FUZZTIME ?= 30s
fuzz:
	@out=$$(mktemp); trap 'rm -f '$$out EXIT; \
	for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$t"; \
	    if ! $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg >$$out 2>&1; then \
	      cat $$out; \
	      if grep -q 'Failing input written' $$out || ! grep -q 'context deadline exceeded' $$out; then exit 1; fi; \
	      echo "fuzz $$t: the engine stopped at its deadline with no failing input (golang/go#51484): not a failure"; \
	    else tail -n 2 $$out; fi; \
	  done; \
	done

## test-emulators: objstore and `loader load` against the GCS and Azure emulators on loopback, not
## part of `test`: fake-gcs-server (a Go module, built once into bin/) and Azurite (an npm package,
## installed once into bin/azurite/ when npm is there; its tests skip, saying so, without node)
FAKE_GCS_VERSION := v1.52.2
AZURITE_VERSION  := 3.35.0
test-emulators:
	@mkdir -p bin
	test -x bin/fake-gcs-server || GOBIN=$(CURDIR)/bin $(GO) install github.com/fsouza/fake-gcs-server@$(FAKE_GCS_VERSION)
	@if test -x bin/azurite/node_modules/.bin/azurite-blob; then :; \
	elif command -v npm >/dev/null; then npm install --prefix bin/azurite --no-audit --no-fund azurite@$(AZURITE_VERSION); \
	else echo "npm not found: the Azure (Azurite) tests will skip"; fi
	$(GO) test -race -count=1 -run 'Emulator' -v ./objstore/ ./cmd/loader/

## bench-objects: loads the same generated Parquet, CSV and IPC files from local disk and from versitygw
## on loopback into a discard sink; prints bucket ÷ local throughput, requests per file and read
## amplification (BENCH_OBJECTS_ROWS rows in 8 files per format; BENCH_OBJECTS_FORMATS=ipc for one), and
## writes them to BENCH_OUT/objects.json
BENCH_OBJECTS_ROWS ?= 1000000
BENCH_OBJECTS_FORMATS ?= parquet,csv,ipc
bench-objects: versitygw
	@mkdir -p $(BENCH_OUT)
	LOADER_BENCH_OBJECTS=1 LOADER_BENCH_OBJECTS_ROWS=$(BENCH_OBJECTS_ROWS) LOADER_BENCH_OBJECTS_FORMATS=$(BENCH_OBJECTS_FORMATS) \
	  LOADER_BENCH_OBJECTS_OUT=$(CURDIR)/$(BENCH_OUT)/objects.json \
	  $(GO) test -count=1 -timeout 30m -run '^TestBenchObjects$$' -v ./cmd/loader/ | grep -v '^=== '

## testdata: generate the demo dataset under testdata/demo
testdata: build
	$(BIN) generate --out $(DEMO_DIR) --rows $(DEMO_ROWS)

## demo: load the demo dataset into the embedded sink and verify the row count
demo: build
	BIN=$(BIN) DEMO_DIR=$(DEMO_DIR) DEMO_ROWS=$(DEMO_ROWS) ./scripts/demo.sh

clean:
	rm -rf bin .demo
