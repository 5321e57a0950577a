# mk/tansu.mk: fencecheck against Tansu, an Apache-2.0 Kafka-compatible broker in Rust.
#
# Included from the Makefile. Not part of `make test`: the build takes minutes.
#
#   make tansu          # build Tansu $(TANSU_VERSION) with cargo into $(TANSU_ROOT)
#   make tansu-check    # start it, probe it, run a scenario on it through --cluster external
#
# Tansu routes some of the transaction APIs and not others, so what fencecheck must say about it
# is what the broker cannot do, never a fencing violation: tansu-check prints the preflight's
# table and the run's verdict (error, naming what is missing) and fails if the run gave any other
# verdict. The broker commands kill and restart the one broker (mk/tansu.sh).
#
# Variables:
#   TANSU_VERSION   crates.io version (default 0.6.0)
#   TANSU_ROOT      cargo install root (default $(HOME)/.cache/fencecheck/tansu/$(TANSU_VERSION))
#   TANSU_OUT       folder of the check's files and run directories (default runs/tansu)

TANSU_VERSION ?= 0.6.0
TANSU_ROOT ?= $(HOME)/.cache/fencecheck/tansu/$(TANSU_VERSION)
TANSU_BIN := $(TANSU_ROOT)/bin/tansu
TANSU_OUT ?= runs/tansu

.PHONY: tansu tansu-check
tansu: $(TANSU_BIN)

$(TANSU_BIN):
	@command -v cargo >/dev/null 2>&1 || { echo "make tansu: cargo not found; install Rust (https://rustup.rs) and re-run" >&2; exit 1; }
	cargo install tansu --version $(TANSU_VERSION) --locked --no-default-features --features libsql --root $(TANSU_ROOT)

tansu-check: $(TANSU_BIN) build
	TANSU=$(TANSU_BIN) FENCECHECK=$(abspath bin/fencecheck) OUT=$(TANSU_OUT) bash mk/tansu.sh
