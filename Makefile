# fencecheck: see README.md. Every target works on a fresh clone; `make test` is what CI runs.
GO ?= go
GOTEST_TIMEOUT ?= 30m
# Executions, not a duration: Go 1.26's fuzz coordinator can fail a timed run that ends while a
# busy worker is still executing ("context deadline exceeded", no failing input); a count has
# no deadline to race. 50,000 is about 10 s of the slower target here.
FUZZTIME ?= 50000x

# The kafka target (Maven-fetched Apache Kafka jars) lives in mk/kafka.mk.
-include mk/kafka.mk
# The adapters of the exec protocol in adapters/ (docs/clients.md): the Java reference adapter
# on kafka-clients (mk/java-adapter.mk) and the third-party clients, each in mk/NAME-adapter.mk.
-include mk/java-adapter.mk
# The Kafka Streams pipeline member (mk/streams-adapter.mk), compiled against the Java adapter.
-include mk/streams-adapter.mk
CLIENT_ADAPTERS := librdkafka sarama kafkajs kafkapython
-include $(CLIENT_ADAPTERS:%=mk/%-adapter.mk)
# The krabka adapter (Rust): built only by its own target, make krabka-adapter, not by make
# adapters or make test (its cold build is long; mk/krabka-adapter.mk).
-include mk/krabka-adapter.mk
# The @platformatic/kafka adapter (Node.js 22.22+): built only by its own target, make
# platformatic-adapter, not by make adapters or make test (its tests cost about twice KafkaJS's;
# mk/platformatic-adapter.mk).
-include mk/platformatic-adapter.mk
# Tansu, a Kafka-compatible broker that lacks parts of the transaction APIs: the preflight's
# test on a real broker (make tansu-check; docs/clusters.md#preflight).
-include mk/tansu.mk

# The containers backend's Docker engine and images: docker/engine.sh, docker/images.sh.
ENGINE := docker/engine.sh
ENGINE_HOST := $(shell $(ENGINE) host)
# KEEP_ENGINE=1 leaves the engine running after `make test` (for a quicker next run).
KEEP_ENGINE ?= 0

.PHONY: adapters client-adapters all build test test-go test-kafka-lane test-light-lane test-extra test-long lint fuzz bench scale run selftest soak ttd regressions test-browser browser clean docker-engine docker-engine-stop images

all: build

# The first build downloads every module and compiles it, printing little but `go: downloading`:
# say so first. -buildvcs=auto stamps the git revision (fencecheck version, run.json) even where
# GOFLAGS turns it off, and builds without it outside a checkout.
build:
	@echo "building bin/fencecheck (the first build downloads the Go modules and compiles them; that takes minutes, later builds seconds)"
	$(GO) build -buildvcs=auto -o bin/fencecheck ./cmd/fencecheck

## run: the default scenario (steady, on the embedded cluster) with its report in runs/latest/.
run: build
	./bin/fencecheck run

## selftest: every mutant transport must come out invalid, the real one valid.
selftest: build
	./bin/fencecheck selftest

## soak: the false-alarm measurement: every catalogue scenario SOAK_RUNS times on SOAK_CLUSTER,
## each run with a fresh seed; the table (markdown and JSON) goes to soaks/<UTC time>/. Extra
## flags in SOAK_ARGS, e.g. SOAK_ARGS='chaos pause-broker --out soaks/nightly' (an --out that
## holds a soak continues it). Fails unless every run was valid.
SOAK_RUNS ?= 10
SOAK_CLUSTER ?= embedded
SOAK_ARGS ?=
soak: build
	./bin/fencecheck soak --cluster $(SOAK_CLUSTER) --runs $(SOAK_RUNS) $(SOAK_ARGS)

## ttd: the time to detect (issue 43; docs/measurements.md, "Time to detect"): for each mutant
## of TTD_MUTANTS, each method of TTD_METHODS (catalogue, chaos, explore, own) and each seed of
## TTD_SEEDS, the wall time to the first invalid verdict within TTD_BUDGET, TTD_PARALLEL
## attempts at a time; attempts.tsv and table.md go to TTD_OUT. Not part of make test: an
## attempt that misses takes its whole budget.
TTD_MUTANTS ?= unknown-commit-fails
TTD_METHODS ?= catalogue,chaos,explore
TTD_SEEDS ?= 1000,2000,3000,4000,5000
TTD_BUDGET ?= 10m
TTD_PARALLEL ?= 3
TTD_OUT ?= ttd/$(shell date -u +%Y%m%dT%H%M%SZ)
ttd: build
	$(GO) run ./internal/ttd --fencecheck bin/fencecheck --mutants $(TTD_MUTANTS) --methods $(TTD_METHODS) \
		--seeds $(TTD_SEEDS) --budget $(TTD_BUDGET) --parallel $(TTD_PARALLEL) --out $(TTD_OUT)

## regressions: measure every regression of docs/regressions.md: the built-in suite
## regressions (its scenario runs, each with the verdict it must give; the race group with a
## -race build), merged into runs/regressions/all, what the brokers answered each late request,
## then the regressions that are Go tests. KAFKA=0 runs only the kfake systems; LOCK=FILE holds
## an flock on FILE around each run; RELEASES picks the releases of the per-release Go tests.
regressions: kafka
	KAFKA=$(or $(KAFKA),1) LOCK=$(LOCK) GO=$(GO) sh mk/regressions.sh

## lint: formatting and vet; fails on any gofmt difference. Then actionlint (a Go module, pinned,
## fetched by the Go toolchain) checks the CI workflows (.github/workflows: the nightly suite and the full matrix).
ACTIONLINT ?= github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') $$(git ls-files --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags kafka ./...
	$(GO) run $(ACTIONLINT) .github/workflows/*.yml

## test: everything CI checks. The local-Kafka tests need the jars (`make kafka`), the
## containers tests a Docker engine and the images, the report's browser test Chromium: test
## installs Chromium if missing (`make browser`), starts the project's own engine (installing
## docker.io if missing; both need root), builds the images, and afterwards stops the engine and
## checks that nothing of it is left (KEEP_ENGINE=1 keeps it). With FENCECHECK_REQUIRE_KAFKA=1,
## FENCECHECK_REQUIRE_DOCKER=1 and FENCECHECK_REQUIRE_BROWSER=1 (set here) a missing install
## fails instead of skipping, so make test runs every test CI runs.
##
## The tests run in two lanes at once, chosen by the build tag kafka (internal/testenv's
## package comment says which test files carry it). The Kafka lane is `go test -tags kafka`
## over the packages with kafka test files (KAFKA_PKGS): the tests that start Kafka JVMs or
## containers, one package at a time (-p 1): scenario runs are timed in leases, and two
## packages starting JVMs at once on 2 cores starve each other. The light lane is plain
## `go test ./...`, every other test. test-extra (the race detector, the fuzz targets, the
## adapters' quirk tests) runs beside both. Measured at 3583812 (`-exec` under /usr/bin/time):
## the Kafka lane's tests use about one core (870 s of CPU in 20 min; its JVMs), the light
## lane's about a quarter of one (320 s: they wait on lease timers and session timeouts), and
## test-extra is mostly compiling (on a cold cache the race build of transport/... takes about
## 155 s of CPU). Within a package, tests marked parallel run four at a time (-parallel 4): the embedded
## scenario runs mostly wait on lease timers, and so do the Kafka tests marked parallel (the
## freeze-only scenario runs on one shared cluster, two at a time; the pipeline suites).
KAFKA_PKGS := $(sort $(patsubst %/,%,$(dir $(shell grep -rlx --include='*_test.go' --exclude-dir=node_modules --exclude-dir=.git '//go:build kafka' .))))
REQUIRE := FENCECHECK_REQUIRE_KAFKA=1 FENCECHECK_REQUIRE_DOCKER=1 FENCECHECK_REQUIRE_BROWSER=1
GOTEST := $(GO) test -p 1 -parallel 4 -timeout $(GOTEST_TIMEOUT)

## adapters: every adapter of adapters/ but krabka (and platformatic); client-adapters: the third-party ones (PyPI,
## npm and the Go module proxy, no Maven): librdkafka, Sarama, KafkaJS and kafka-python.
adapters: java-adapter streams-adapter client-adapters
client-adapters: $(CLIENT_ADAPTERS:%=%-adapter)

test: lint kafka adapters browser
	$(MAKE) -j3 test-kafka-lane test-light-lane test-extra

## test-go: the Go tests of both lanes, without the race and fuzz runs.
test-go:
	$(MAKE) -j2 test-kafka-lane test-light-lane

test-kafka-lane:
	KEEP_ENGINE=$(KEEP_ENGINE) docker/with-engine.sh sh -c '$(MAKE) images && \
	  $(REQUIRE) $(GOTEST) -tags kafka $(KAFKA_PKGS)'

test-light-lane:
	$(REQUIRE) $(GOTEST) ./...

## test-extra: the race detector over transport/..., the fuzz targets and the adapters' quirk
## tests. make test runs it beside the two lanes, not after the light lane: it is mostly
## compiling (the race and fuzz builds of every dependency), and the light lane mostly waits.
test-extra:
	$(GO) test -race -timeout 10m ./transport/...
	$(MAKE) fuzz
	$(MAKE) test-adapters

## test-adapters: the client-quirk regressions of the third-party adapters (seconds, no broker):
## adapters/kafkajs/quirks.test.js, adapters/sarama/quirks_test.go and
## adapters/kafkapython/quirks_test.py, each failing once a client release fixes its quirk. make
## test runs it in the light lane. adapters/platformatic/quirks.test.js runs too when that
## optional adapter is built (make platformatic-adapter), on its Node.js.
.PHONY: test-adapters
test-adapters: kafkajs-adapter sarama-adapter kafkapython-adapter
	$(NODE) --test adapters/kafkajs/
	cd adapters/sarama && $(GO) test ./...
	"$(KAFKAPYTHON_ADAPTER_VENV)/bin/python" -B -W ignore::ResourceWarning -m unittest discover -s adapters/kafkapython -p 'quirks_test.py'
	@if [ -f adapters/platformatic/target/.built ]; then \
	  echo "adapters/platformatic/run-node --test adapters/platformatic/quirks.test.js"; \
	  adapters/platformatic/run-node --test adapters/platformatic/quirks.test.js; \
	else echo "adapters/platformatic/quirks.test.js: skipped, the adapter is not built (make platformatic-adapter)"; fi

## test-long: make test's Go tests plus the long ones (internal/testenv.Long): each repeats at
## full length what make test covers more briefly, such as a scenario on a second backend.
test-long: kafka browser
	FENCECHECK_LONG=1 $(MAKE) test-go

## browser: Chromium on PATH for the report's browser test (reports/browser_test.go), installed
## from Debian (apt-get, root) when missing; not root, it fails saying what to install.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "chromium is missing (the report's browser test needs it) and this is not root: install Debian's chromium (apt-get install chromium)"; exit 1; \
	  fi; \
	  echo "installing chromium (apt-get; the report's browser test needs it)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@echo "chromium: $$(command -v chromium)"

## docker-engine: start the project's private Docker engine (docker.io from Debian, no bridge
## network; see docker/engine.sh). docker-engine-stop removes it and checks nothing is left.
docker-engine:
	$(ENGINE) start

docker-engine-stop:
	$(ENGINE) stop
	$(ENGINE) check-clean

## images: fencecheck/kafka:$(KAFKA_VERSION) (this machine's JDK + the jars of make kafka) and
## fencecheck/toxiproxy, built locally with no registry and cached in ~/.cache/fencecheck/images.
images: docker-engine kafka
	DOCKER_HOST=$(ENGINE_HOST) docker/images.sh kafka $(KAFKA_HOME_DIR)
	DOCKER_HOST=$(ENGINE_HOST) docker/images.sh toxiproxy

## fuzz: a short run of each fuzz target (FUZZTIME per target).
fuzz:
	$(GO) test ./transport/record -run '^$$' -fuzz FuzzDecodeValue -fuzztime $(FUZZTIME)
	$(GO) test ./checker/history -run '^$$' -fuzz FuzzDecodeLine -fuzztime $(FUZZTIME)

## bench: the benchmarks whose figures the README quotes.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./transport/
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=3x ./checker/...
	$(GO) test -run '^$$' -bench BenchmarkLinkRoundTrip -count 3 ./cluster/links/

## scale: the fleets of scenarios/fleet (not in make test), each a fencecheck run that must
## come out valid: 500 candidates for one role, 500 processes of four roles and 2,000 processes
## of one role each (400 roles of 5), without faults, then holder-partition among the 2,000.
## Embedded cluster and conn links as the files say; SCALE_FLAGS adds run flags, such as
## SCALE_FLAGS='--cluster local' (make kafka) or '--duration 30s'. Each run's liveness is in
## its results.json and report, what it cost in its run.json (resources); runs go to runs/scale.
SCALE_FILES ?= scenarios/fleet/steady-500-one-role.yaml scenarios/fleet/steady-500x4.yaml \
	scenarios/fleet/steady-2000.yaml scenarios/fleet/holder-partition-2000.yaml
SCALE_FLAGS ?=
scale: build
	./bin/fencecheck run $(SCALE_FILES) --out runs/scale --seed 1 $(SCALE_FLAGS)

clean:
	rm -rf bin
