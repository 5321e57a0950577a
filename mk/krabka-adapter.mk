# mk/krabka-adapter.mk: build the krabka adapter of the exec protocol (adapters/krabka,
# docs/exec-protocol.md): the seed's BrokerTransport on krabka 0.7.1, a Rust Kafka client
# (crates krabka-client-producer, -consumer and -admin).
#
#   make krabka-adapter           # then: --transport exec:adapters/krabka/fencecheck-krabka-adapter
#
# adapters/krabka is a Cargo project of its own. `cargo build --release --locked` builds it from
# the committed Cargo.lock, fetching the crates from crates.io (offline when CARGO_HOME has
# them), into adapters/krabka/target/release/. Two things the lockfile and the flags carry:
#   - --ignore-rust-version: the krabka crates declare rust-version 1.98.1, newer than the
#     toolchain this project has (Rust 1.95; no newer one can be fetched here), and they build
#     and pass the conformance suite with it all the same. Cargo refuses such a build unless
#     told to ignore the declaration.
#   - picky-krb 0.13.0 in Cargo.lock: 0.13.1 made AuthPack generic, which krabka-sspi 0.23.0
#     (pulled in by krabka's Kerberos support) does not compile against. --locked keeps it.
# Not part of CLIENT_ADAPTERS (make adapters, make test) yet: a cold build compiles about 380
# crates, about 21 minutes on a 2-core machine (docs/clients.md has the measurements).
# Included from the Makefile; also works alone (make -f mk/krabka-adapter.mk).

KRABKA_ADAPTER_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)/adapters/krabka
KRABKA_ADAPTER_SRC := $(wildcard $(KRABKA_ADAPTER_DIR)/src/*.rs) $(KRABKA_ADAPTER_DIR)/Cargo.toml $(KRABKA_ADAPTER_DIR)/Cargo.lock
KRABKA_ADAPTER_STAMP := $(KRABKA_ADAPTER_DIR)/target/.built
CARGO ?= cargo

.PHONY: krabka-adapter krabka-adapter-clean
krabka-adapter: $(KRABKA_ADAPTER_STAMP)

$(KRABKA_ADAPTER_STAMP): $(KRABKA_ADAPTER_SRC)
	@command -v $(firstword $(CARGO)) >/dev/null 2>&1 || { echo "make krabka-adapter: cargo ($(CARGO)) not found; install Rust 1.95 or later (rustup, or apt-get install cargo)" >&2; exit 1; }
	@rm -f "$@"
	@echo "building the krabka adapter (a cold build compiles about 380 crates: minutes)"
	@cd "$(KRABKA_ADAPTER_DIR)" && $(CARGO) build --release --locked --ignore-rust-version || { \
	  echo "make krabka-adapter: cargo build failed in $(KRABKA_ADAPTER_DIR) (is crates.io reachable, or CARGO_HOME's cache complete? --locked refuses a Cargo.lock that Cargo.toml no longer matches)" >&2; exit 1; }
	@touch "$@"
	@echo "krabka adapter: krabka-client-producer $$(sed -n '/^name = "krabka-client-producer"/{n;s/version = "\(.*\)"/\1/p}' "$(KRABKA_ADAPTER_DIR)/Cargo.lock"); run it with --transport exec:$(KRABKA_ADAPTER_DIR)/fencecheck-krabka-adapter"

krabka-adapter-clean:
	rm -rf "$(KRABKA_ADAPTER_DIR)/target"
