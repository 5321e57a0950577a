# mk/sarama-adapter.mk: build the Sarama adapter of the exec protocol (adapters/sarama,
# docs/exec-protocol.md): fencecheck's transport design on github.com/IBM/sarama.
#
#   make sarama-adapter               # then: --transport exec:adapters/sarama/fencecheck-sarama-adapter
#
# adapters/sarama is a Go module of its own (the main module does not depend on Sarama);
# `go build` fetches Sarama at the version go.mod pins, checked against the committed go.sum,
# from the Go module proxy (offline when the module cache has them) and writes the binary to
# adapters/sarama/target/. Included from the Makefile; also works alone (make -f mk/sarama-adapter.mk).

SARAMA_ADAPTER_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)/adapters/sarama
SARAMA_ADAPTER_SRC := $(wildcard $(SARAMA_ADAPTER_DIR)/*.go) $(SARAMA_ADAPTER_DIR)/go.mod $(SARAMA_ADAPTER_DIR)/go.sum
SARAMA_ADAPTER_STAMP := $(SARAMA_ADAPTER_DIR)/target/.built
GO ?= go

.PHONY: sarama-adapter sarama-adapter-clean
sarama-adapter: $(SARAMA_ADAPTER_STAMP)

$(SARAMA_ADAPTER_STAMP): $(SARAMA_ADAPTER_SRC)
	@command -v $(firstword $(GO)) >/dev/null 2>&1 || { echo "make sarama-adapter: Go ($(GO)) not found; install Go 1.26 (https://go.dev/dl/)" >&2; exit 1; }
	@rm -f "$@"
	@cd "$(SARAMA_ADAPTER_DIR)" && $(GO) build -mod=readonly -o target/fencecheck-sarama-adapter . || { \
	  echo "make sarama-adapter: go build failed in $(SARAMA_ADAPTER_DIR) (is the Go module proxy reachable for github.com/IBM/sarama, or is Go older than go.mod's 1.26?)" >&2; exit 1; }
	@touch "$@"
	@echo "sarama adapter: $$(cd "$(SARAMA_ADAPTER_DIR)" && $(GO) list -m -f '{{.Path}} {{.Version}}' github.com/IBM/sarama); run it with --transport exec:$(SARAMA_ADAPTER_DIR)/fencecheck-sarama-adapter"

sarama-adapter-clean:
	rm -rf "$(SARAMA_ADAPTER_DIR)/target"
