# fencecheck: see README.md. Every target works on a fresh clone; `make test` is what CI runs.
GO ?= go
GOTEST_TIMEOUT ?= 30m
FUZZTIME ?= 10s

# The kafka target (Maven-fetched Apache Kafka jars) lives in mk/kafka.mk.
-include mk/kafka.mk

.PHONY: all build test test-go lint fuzz bench run clean

all: build

build:
	$(GO) build -o bin/fencecheck ./cmd/fencecheck

## lint: formatting and vet; fails on any gofmt difference.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') $$(git ls-files --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## test: everything CI checks. The local-Kafka tests need the jars (`make kafka`); with
## FENCECHECK_REQUIRE_KAFKA=1 (set here) a missing install fails instead of skipping.
test: lint kafka
	FENCECHECK_REQUIRE_KAFKA=1 $(GO) test -timeout $(GOTEST_TIMEOUT) ./...
	$(MAKE) fuzz

## fuzz: a short run of each fuzz target (FUZZTIME per target).
fuzz:
	$(GO) test ./transport -run '^$$' -fuzz FuzzDecodeValue -fuzztime $(FUZZTIME)

## bench: the benchmarks whose figures the README quotes.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./transport/

clean:
	rm -rf bin
