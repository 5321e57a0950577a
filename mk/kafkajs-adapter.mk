# mk/kafkajs-adapter.mk: build the KafkaJS adapter of the exec protocol (adapters/kafkajs,
# docs/exec-protocol.md): fencecheck's transport semantics on KafkaJS (npm kafkajs, pinned
# exactly in adapters/kafkajs/package.json, locked by package-lock.json).
#
#   make kafkajs-adapter      # then: --transport exec:adapters/kafkajs/fencecheck-kafkajs-adapter
#
# `npm ci` installs the locked packages into adapters/kafkajs/node_modules (git-ignored) from the
# npm registry; the adapter is plain JavaScript (no build step), run with node (18 or later).
# A stamp, adapters/kafkajs/target/.built, marks a complete install: a no-op while it is newer
# than package.json and package-lock.json and node_modules holds kafkajs.

KAFKAJS_ADAPTER_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)/adapters/kafkajs
KAFKAJS_ADAPTER_STAMP := $(KAFKAJS_ADAPTER_DIR)/target/.built
NPM ?= npm
NODE ?= node

# A missing install (node_modules deleted) rebuilds even with a fresh stamp.
KAFKAJS_ADAPTER_FORCE := $(if $(wildcard $(KAFKAJS_ADAPTER_DIR)/node_modules/kafkajs/package.json),,kafkajs-adapter-force)

.PHONY: kafkajs-adapter kafkajs-adapter-clean kafkajs-adapter-force
kafkajs-adapter: $(KAFKAJS_ADAPTER_STAMP)

$(KAFKAJS_ADAPTER_STAMP): $(KAFKAJS_ADAPTER_DIR)/package.json $(KAFKAJS_ADAPTER_DIR)/package-lock.json $(KAFKAJS_ADAPTER_FORCE)
	@command -v $(NODE) >/dev/null 2>&1 || { echo "make kafkajs-adapter: node not found; install Node.js 18 or later (e.g. apt-get install nodejs npm)" >&2; exit 1; }
	@$(NODE) -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' || { echo "make kafkajs-adapter: node $$($(NODE) --version) is too old; KafkaJS needs Node.js 18 or later here" >&2; exit 1; }
	@command -v $(NPM) >/dev/null 2>&1 || { echo "make kafkajs-adapter: npm not found; install it (apt-get install npm)" >&2; exit 1; }
	@rm -f "$@"
	@cd "$(KAFKAJS_ADAPTER_DIR)" && $(NPM) ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null || { \
	  echo "make kafkajs-adapter: npm ci failed: could not install kafkajs from package-lock.json (is the npm registry reachable?)" >&2; exit 1; }
	@mkdir -p "$(dir $@)" && touch "$@"
	@echo "kafkajs adapter: kafkajs $$(cd "$(KAFKAJS_ADAPTER_DIR)" && $(NODE) -p 'require("kafkajs/package.json").version'); run it with --transport exec:$(KAFKAJS_ADAPTER_DIR)/fencecheck-kafkajs-adapter"

kafkajs-adapter-force:

kafkajs-adapter-clean:
	rm -rf "$(KAFKAJS_ADAPTER_DIR)/target" "$(KAFKAJS_ADAPTER_DIR)/node_modules"
