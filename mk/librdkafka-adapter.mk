# mk/librdkafka-adapter.mk: build the librdkafka adapter of the exec protocol
# (adapters/librdkafka, docs/exec-protocol.md): librdkafka 2.16.0 through confluent-kafka-python
# 2.16.1, from PyPI.
#
#   make librdkafka-adapter   # then: --transport exec:adapters/librdkafka/fencecheck-librdkafka-adapter
#
# It makes a virtual environment in adapters/librdkafka/target/venv with the machine's python3
# (PYTHON3; 3.10 to 3.13, the Pythons confluent-kafka's pinned wheels cover), installs
# adapters/librdkafka/requirements.txt into it (exact version, hashes, wheels only), checks
# that the adapter compiles and answers hello, and touches adapters/librdkafka/target/.built.
# A no-op when nothing changed; the venv is rebuilt only when requirements.txt changes.

LIBRDKAFKA_ADAPTER_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)/adapters/librdkafka
LIBRDKAFKA_ADAPTER_VENV := $(LIBRDKAFKA_ADAPTER_DIR)/target/venv
LIBRDKAFKA_ADAPTER_STAMP := $(LIBRDKAFKA_ADAPTER_DIR)/target/.built
PYTHON3 ?= python3

.PHONY: librdkafka-adapter librdkafka-adapter-clean
librdkafka-adapter: $(LIBRDKAFKA_ADAPTER_STAMP)

$(LIBRDKAFKA_ADAPTER_VENV)/.installed: $(LIBRDKAFKA_ADAPTER_DIR)/requirements.txt
	@command -v $(PYTHON3) >/dev/null 2>&1 || { echo "make librdkafka-adapter: $(PYTHON3) not found; install Python 3.10-3.13 (apt-get install python3 python3-venv)" >&2; exit 1; }
	@$(PYTHON3) -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 13) else 1)' || { \
	  echo "make librdkafka-adapter: $(PYTHON3) is Python $$($(PYTHON3) -c 'import platform; print(platform.python_version())'); confluent-kafka 2.16.1's pinned wheels need 3.10-3.13 (set PYTHON3=...)" >&2; exit 1; }
	@rm -rf "$(LIBRDKAFKA_ADAPTER_VENV)" && mkdir -p "$(LIBRDKAFKA_ADAPTER_DIR)/target"
	@$(PYTHON3) -m venv "$(LIBRDKAFKA_ADAPTER_VENV)" || { rm -rf "$(LIBRDKAFKA_ADAPTER_VENV)"; \
	  echo "make librdkafka-adapter: $(PYTHON3) -m venv failed; install the venv module (apt-get install python3-venv)" >&2; exit 1; }
	@"$(LIBRDKAFKA_ADAPTER_VENV)/bin/python" -m pip install -q --disable-pip-version-check --no-input \
	  --require-hashes --only-binary=:all: -r "$(LIBRDKAFKA_ADAPTER_DIR)/requirements.txt" || { rm -rf "$(LIBRDKAFKA_ADAPTER_VENV)"; \
	  echo "make librdkafka-adapter: pip could not install confluent-kafka==2.16.1 from adapters/librdkafka/requirements.txt (is PyPI reachable? is there a wheel for this Python and platform?)" >&2; exit 1; }
	@touch "$@"

$(LIBRDKAFKA_ADAPTER_STAMP): $(LIBRDKAFKA_ADAPTER_VENV)/.installed $(LIBRDKAFKA_ADAPTER_DIR)/adapter.py $(LIBRDKAFKA_ADAPTER_DIR)/member.py $(LIBRDKAFKA_ADAPTER_DIR)/fencecheck-librdkafka-adapter
	@rm -f "$@"
	@"$(LIBRDKAFKA_ADAPTER_VENV)/bin/python" -B -c 'import sys, confluent_kafka as c; [compile(open(f).read(), f, "exec") for f in sys.argv[1:]]; \
	  v = (c.__version__, c.libversion()[0]); sys.exit(0 if v == ("2.16.1", "2.16.0") else "confluent-kafka %s / librdkafka %s in the venv, want 2.16.1 / 2.16.0" % v)' \
	  "$(LIBRDKAFKA_ADAPTER_DIR)/adapter.py" "$(LIBRDKAFKA_ADAPTER_DIR)/member.py" || { echo "make librdkafka-adapter: the adapter does not compile or the venv is wrong (make librdkafka-adapter-clean, then again)" >&2; exit 1; }
	@touch "$@"
	@printf '{"id":1,"op":"hello","version":1}\n' | "$(LIBRDKAFKA_ADAPTER_DIR)/fencecheck-librdkafka-adapter" 2>/dev/null | grep -q '"outcome":"ok"' || { \
	  rm -f "$@"; echo "make librdkafka-adapter: the adapter does not answer hello (run: printf '{\"id\":1,\"op\":\"hello\",\"version\":1}\\n' | adapters/librdkafka/fencecheck-librdkafka-adapter)" >&2; exit 1; }
	@echo "librdkafka adapter: confluent-kafka 2.16.1, librdkafka 2.16.0; run it with --transport exec:$(LIBRDKAFKA_ADAPTER_DIR)/fencecheck-librdkafka-adapter"

librdkafka-adapter-clean:
	rm -rf "$(LIBRDKAFKA_ADAPTER_DIR)/target"
