# fencecheck: see README.md. Every target works on a fresh clone; `make test` is what CI runs.
GO ?= go
GOTEST_TIMEOUT ?= 30m
FUZZTIME ?= 10s

# The kafka target (Maven-fetched Apache Kafka jars) lives in mk/kafka.mk.
-include mk/kafka.mk

.PHONY: all build test lint fuzz bench run selftest test-browser clean

all: build

build:
	$(GO) build -o bin/fencecheck ./cmd/fencecheck

## run: the default scenario (steady, on the embedded cluster) with its report in runs/latest/.
run: build
	./bin/fencecheck run

## selftest: every mutant transport must come out invalid, the real one valid.
selftest: build
	./bin/fencecheck selftest

## lint: formatting and vet; fails on any gofmt difference.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') $$(git ls-files --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## test: everything CI checks. The local-Kafka tests need the jars (`make kafka`); with
## FENCECHECK_REQUIRE_KAFKA=1 (set here) a missing install fails instead of skipping.
## Packages run one at a time (-p 1): scenario runs are timed in leases, and two packages
## starting JVMs and workloads at once on 2 cores starve each other.
test: lint kafka
	FENCECHECK_REQUIRE_KAFKA=1 $(GO) test -p 1 -timeout $(GOTEST_TIMEOUT) ./...
	$(GO) test -race -timeout 10m ./transport/...
	$(MAKE) fuzz

## fuzz: a short run of each fuzz target (FUZZTIME per target).
fuzz:
	$(GO) test ./transport -run '^$$' -fuzz FuzzDecodeValue -fuzztime $(FUZZTIME)
	$(GO) test ./checker/history -run '^$$' -fuzz FuzzDecodeLine -fuzztime $(FUZZTIME)

## bench: the benchmarks whose figures the README quotes.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./transport/
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=3x ./checker/...

clean:
	rm -rf bin
