# mk/kafka.mk: fetch Apache Kafka broker jars for fencecheck's `local` cluster.
#
# Included from the Makefile (it also works alone: make -f mk/kafka.mk kafka).
#
#   make kafka                       # Kafka $(KAFKA_VERSION_DEFAULT)
#   make kafka KAFKA_VERSION=3.9.1   # another version (3.x has no transaction.version 2)
#
# The jars come from Maven Central through docker/kafka/pom.xml and land in
# $(KAFKA_HOME_DIR)/libs. A stamp file marks a complete fetch: once it exists
# the target does nothing (no network), and Maven's own cache (~/.m2) lets a
# re-fetch into a new folder run offline.
#
# Variables (override on the command line or in the environment):
#   KAFKA_VERSION   Kafka release to fetch (default $(KAFKA_VERSION_DEFAULT)).
#   KAFKA_CACHE     root of the jar cache (default $(HOME)/.cache/fencecheck/kafka).
#   KAFKA_HOME_DIR  one version's folder, $(KAFKA_CACHE)/$(KAFKA_VERSION); its
#                   libs/ is the broker classpath.
#   MVN             Maven command (default mvn).
#
# Exported to every recipe (so `make test` runs the local-cluster tests on the
# version fetched here):
#   FENCECHECK_KAFKA_HOME = $(KAFKA_HOME_DIR). The Go side (cluster/local)
#                   reads it, else falls back to $(HOME)/.cache/fencecheck/kafka/<default version>.

KAFKA_MK_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)

KAFKA_VERSION_DEFAULT := 4.1.2
KAFKA_VERSION ?= $(KAFKA_VERSION_DEFAULT)
KAFKA_CACHE ?= $(HOME)/.cache/fencecheck/kafka
KAFKA_HOME_DIR ?= $(KAFKA_CACHE)/$(KAFKA_VERSION)
MVN ?= mvn

# 3.x logs through reload4j, 4.x through log4j2: the pom's profiles pick the binding.
KAFKA_MVN_PROFILE := $(if $(filter 3.%,$(KAFKA_VERSION)),kafka3,kafka4)
KAFKA_STAMP := $(KAFKA_HOME_DIR)/.fencecheck-fetched

export FENCECHECK_KAFKA_HOME := $(KAFKA_HOME_DIR)

.PHONY: kafka kafka-clean
kafka:
	@if [ -f "$(KAFKA_STAMP)" ]; then \
	  echo "kafka $(KAFKA_VERSION): cached in $(KAFKA_HOME_DIR)"; \
	else \
	  command -v $(firstword $(MVN)) >/dev/null 2>&1 || { \
	    echo "make kafka: Maven ($(MVN)) not found; install it (apt-get install maven) and re-run: make kafka KAFKA_VERSION=$(KAFKA_VERSION)" >&2; exit 1; }; \
	  echo "kafka $(KAFKA_VERSION): fetching jars into $(KAFKA_HOME_DIR)/libs"; \
	  rm -rf "$(KAFKA_HOME_DIR)/libs.tmp" && mkdir -p "$(KAFKA_HOME_DIR)" && \
	  set -- -q -B -Dstyle.color=never -f "$(KAFKA_MK_ROOT)/docker/kafka/pom.xml" -P$(KAFKA_MVN_PROFILE) \
	    -Dkafka.version=$(KAFKA_VERSION) -Dkafka.libs="$(KAFKA_HOME_DIR)/libs.tmp" \
	    dependency:copy-dependencies; \
	  { $(MVN) -o "$$@" >/dev/null 2>&1 || $(MVN) "$$@"; } || { \
	    rm -rf "$(KAFKA_HOME_DIR)/libs.tmp"; rmdir "$(KAFKA_HOME_DIR)" 2>/dev/null; \
	    echo "make kafka: Maven could not fetch org.apache.kafka:kafka_2.13:$(KAFKA_VERSION) and its dependencies" >&2; \
	    echo "  (is Maven Central reachable, and does that version exist?). Re-run: make kafka KAFKA_VERSION=$(KAFKA_VERSION)" >&2; \
	    exit 1; }; \
	  ls "$(KAFKA_HOME_DIR)/libs.tmp"/kafka_2.13-$(KAFKA_VERSION).jar >/dev/null 2>&1 || { \
	    echo "make kafka: no kafka_2.13-$(KAFKA_VERSION).jar after the fetch; re-run: make kafka KAFKA_VERSION=$(KAFKA_VERSION)" >&2; exit 1; }; \
	  rm -rf "$(KAFKA_HOME_DIR)/libs" && mv "$(KAFKA_HOME_DIR)/libs.tmp" "$(KAFKA_HOME_DIR)/libs" && \
	  echo "$(KAFKA_VERSION)" > "$(KAFKA_STAMP)" && \
	  echo "kafka $(KAFKA_VERSION): $$(ls "$(KAFKA_HOME_DIR)/libs" | wc -l) jars in $(KAFKA_HOME_DIR)/libs"; \
	fi

# Forget one version's jars (Maven's ~/.m2 cache stays, so `make kafka` then
# runs offline).
kafka-clean:
	rm -rf "$(KAFKA_HOME_DIR)"
