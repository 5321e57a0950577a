# mk/kafkapython-adapter.mk: build the kafka-python adapter of the exec protocol
# (adapters/kafkapython, docs/exec-protocol.md): kafka-python 3.0.12, a pure-Python client,
# from PyPI.
#
#   make kafkapython-adapter   # then: --transport exec:adapters/kafkapython/fencecheck-kafkapython-adapter
#
# It makes a virtual environment in adapters/kafkapython/target/venv with the machine's python3
# (PYTHON3; 3.8 or newer, what kafka-python 3.0.12 declares), installs
# adapters/kafkapython/requirements.txt into it (exact version, hash, wheel only), checks that
# the adapter compiles and answers hello, and touches adapters/kafkapython/target/.built.
# A no-op when nothing changed; the venv is rebuilt only when requirements.txt changes.

KAFKAPYTHON_ADAPTER_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)/adapters/kafkapython
KAFKAPYTHON_ADAPTER_VENV := $(KAFKAPYTHON_ADAPTER_DIR)/target/venv
KAFKAPYTHON_ADAPTER_STAMP := $(KAFKAPYTHON_ADAPTER_DIR)/target/.built
PYTHON3 ?= python3

.PHONY: kafkapython-adapter kafkapython-adapter-clean
kafkapython-adapter: $(KAFKAPYTHON_ADAPTER_STAMP)

$(KAFKAPYTHON_ADAPTER_VENV)/.installed: $(KAFKAPYTHON_ADAPTER_DIR)/requirements.txt
	@command -v $(PYTHON3) >/dev/null 2>&1 || { echo "make kafkapython-adapter: $(PYTHON3) not found; install Python 3.8 or newer (apt-get install python3 python3-venv)" >&2; exit 1; }
	@$(PYTHON3) -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 8) else 1)' || { \
	  echo "make kafkapython-adapter: $(PYTHON3) is Python $$($(PYTHON3) -c 'import platform; print(platform.python_version())'); kafka-python 3.0.12 needs 3.8 or newer (set PYTHON3=...)" >&2; exit 1; }
	@rm -rf "$(KAFKAPYTHON_ADAPTER_VENV)" && mkdir -p "$(KAFKAPYTHON_ADAPTER_DIR)/target"
	@$(PYTHON3) -m venv "$(KAFKAPYTHON_ADAPTER_VENV)" || { rm -rf "$(KAFKAPYTHON_ADAPTER_VENV)"; \
	  echo "make kafkapython-adapter: $(PYTHON3) -m venv failed; install the venv module (apt-get install python3-venv)" >&2; exit 1; }
	@"$(KAFKAPYTHON_ADAPTER_VENV)/bin/python" -m pip install -q --disable-pip-version-check --no-input \
	  --require-hashes --only-binary=:all: -r "$(KAFKAPYTHON_ADAPTER_DIR)/requirements.txt" || { rm -rf "$(KAFKAPYTHON_ADAPTER_VENV)"; \
	  echo "make kafkapython-adapter: pip could not install kafka-python==3.0.12 from adapters/kafkapython/requirements.txt (is PyPI reachable?)" >&2; exit 1; }
	@touch "$@"

$(KAFKAPYTHON_ADAPTER_STAMP): $(KAFKAPYTHON_ADAPTER_VENV)/.installed $(KAFKAPYTHON_ADAPTER_DIR)/adapter.py $(KAFKAPYTHON_ADAPTER_DIR)/fencecheck-kafkapython-adapter
	@rm -f "$@"
	@"$(KAFKAPYTHON_ADAPTER_VENV)/bin/python" -B -c 'import sys, kafka; f = sys.argv[1]; compile(open(f).read(), f, "exec"); \
	  sys.exit(0 if kafka.__version__ == "3.0.12" else "kafka-python %s in the venv, want 3.0.12" % kafka.__version__)' \
	  "$(KAFKAPYTHON_ADAPTER_DIR)/adapter.py" || { echo "make kafkapython-adapter: the adapter does not compile or the venv is wrong (make kafkapython-adapter-clean, then again)" >&2; exit 1; }
	@touch "$@"
	@printf '{"id":1,"op":"hello","version":1}\n' | "$(KAFKAPYTHON_ADAPTER_DIR)/fencecheck-kafkapython-adapter" 2>/dev/null | grep -q '"outcome":"ok"' || { \
	  rm -f "$@"; echo "make kafkapython-adapter: the adapter does not answer hello (run: printf '{\"id\":1,\"op\":\"hello\",\"version\":1}\\n' | adapters/kafkapython/fencecheck-kafkapython-adapter)" >&2; exit 1; }
	@echo "kafkapython adapter: kafka-python 3.0.12; run it with --transport exec:$(KAFKAPYTHON_ADAPTER_DIR)/fencecheck-kafkapython-adapter"

kafkapython-adapter-clean:
	rm -rf "$(KAFKAPYTHON_ADAPTER_DIR)/target"
