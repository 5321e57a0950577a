# mk/streams-adapter.mk: build the Kafka Streams pipeline member of the exec protocol
# (adapters/streams, docs/exec-protocol.md "Self-driven members"): a Kafka Streams application
# with processing.guarantee=exactly_once_v2, on the same kafka-clients as the Java adapter.
#
#   make streams-adapter              # then: --transport exec:adapters/streams/fencecheck-streams-adapter
#   make streams-adapter STREAMS_VERSION=3.9.0
#       # another kafka-streams release (and its kafka-clients), built beside the default one in
#       # adapters/streams/versions/3.9.0: --transport exec:adapters/streams/versions/3.9.0/fencecheck-streams-adapter
#       # (the Java adapter's classes it reuses stay those of $(KAFKA_VERSION))
#
# Maven fetches kafka-streams $(KAFKA_VERSION) and Jackson from Maven Central into
# adapters/streams/target/libs; javac compiles against them and the Java adapter's classes
# (the member reuses its error kinds and its read of a producer's id and epoch), so it builds
# after java-adapter. Included from the Makefile after mk/java-adapter.mk.

STREAMS_ADAPTER_DIR := $(KAFKA_MK_ROOT)/adapters/streams
STREAMS_ADAPTER_SRC := $(shell find $(STREAMS_ADAPTER_DIR)/src -name '*.java' 2>/dev/null)
# STREAMS_VERSION: the kafka-streams release; unless it is $(KAFKA_VERSION) (the default), the
# build and a copy of the launcher go to versions/$(STREAMS_VERSION), not target/.
STREAMS_VERSION ?= $(KAFKA_VERSION)
STREAMS_ADAPTER_OUT := $(if $(filter $(KAFKA_VERSION),$(STREAMS_VERSION)),$(STREAMS_ADAPTER_DIR),$(STREAMS_ADAPTER_DIR)/versions/$(STREAMS_VERSION))
STREAMS_ADAPTER_TARGET := $(STREAMS_ADAPTER_OUT)/target
STREAMS_ADAPTER_STAMP := $(STREAMS_ADAPTER_TARGET)/.built-$(STREAMS_VERSION)

.PHONY: streams-adapter streams-adapter-clean
streams-adapter: $(STREAMS_ADAPTER_STAMP)

$(STREAMS_ADAPTER_STAMP): $(STREAMS_ADAPTER_SRC) $(STREAMS_ADAPTER_DIR)/pom.xml $(STREAMS_ADAPTER_DIR)/fencecheck-streams-adapter \
  $(KAFKA_MK_ROOT)/mk/streams-adapter.mk $(JAVA_ADAPTER_STAMP)
	@command -v javac >/dev/null 2>&1 || { echo "make streams-adapter: javac not found; install a JDK 17 (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
	@command -v $(firstword $(MVN)) >/dev/null 2>&1 || { echo "make streams-adapter: Maven ($(MVN)) not found; install it (apt-get install maven)" >&2; exit 1; }
	@rm -rf "$(STREAMS_ADAPTER_TARGET)" && mkdir -p "$(STREAMS_ADAPTER_TARGET)/classes"
	@# A versioned build runs from a copy of the launcher, which finds its jars in target/ beside it.
	@if [ "$(STREAMS_ADAPTER_OUT)" != "$(STREAMS_ADAPTER_DIR)" ]; then \
	  cp "$(STREAMS_ADAPTER_DIR)/fencecheck-streams-adapter" "$(STREAMS_ADAPTER_OUT)/fencecheck-streams-adapter"; fi
	@# Offline first; online when that failed or left kafka-clients out (a kafka-streams jar
	@# cached without its POM resolves offline with no dependencies).
	@set -- -q -B -Dstyle.color=never -f "$(STREAMS_ADAPTER_DIR)/pom.xml" -Dkafka.version=$(STREAMS_VERSION) \
	  -Dadapter.libs="$(STREAMS_ADAPTER_TARGET)/libs" dependency:copy-dependencies; \
	{ { $(MVN) -o "$$@" >/dev/null 2>&1 && ls "$(STREAMS_ADAPTER_TARGET)/libs"/kafka-clients-*.jar >/dev/null 2>&1; } || $(MVN) "$$@"; } || { \
	  echo "make streams-adapter: Maven could not fetch org.apache.kafka:kafka-streams:$(STREAMS_VERSION) (is Maven Central reachable?)" >&2; exit 1; }
	javac -Xlint:all -Werror -d "$(STREAMS_ADAPTER_TARGET)/classes" \
	  -cp "$(JAVA_ADAPTER_DIR)/target/classes:$(STREAMS_ADAPTER_TARGET)/libs/*" $(STREAMS_ADAPTER_SRC)
	@# Jars, not class directories: Java 17 archives no class from a directory (below).
	jar cf "$(STREAMS_ADAPTER_TARGET)/streams-adapter.jar" -C "$(STREAMS_ADAPTER_TARGET)/classes" .
	jar cf "$(STREAMS_ADAPTER_TARGET)/java-adapter.jar" -C "$(JAVA_ADAPTER_DIR)/target/classes" .
	@# A class-data archive of a member's start (the launcher uses it): a member started against
	@# an address nobody serves, observed for 3 s, and closed.
	@printf '%s\n' '{"id":1,"op":"hello","version":1}' \
	  '{"id":2,"op":"member_start","pipeline":{"bootstrap":"127.0.0.1:9","client_id":"cds","group":"cds","input":"in","output":"out","transactional_id":"cds","session_timeout_ms":3000,"rebalance_timeout_ms":3000,"transaction_timeout_ms":3000,"request_timeout_ms":1000,"max_poll":1,"protocol":"classic","stateful":true}}' \
	  '{"id":3,"op":"observe","wait_ms":3000}' '{"id":4,"op":"close"}' | \
	  FENCECHECK_STREAMS_CDS_DUMP="$(STREAMS_ADAPTER_TARGET)/streams.jsa" "$(STREAMS_ADAPTER_OUT)/fencecheck-streams-adapter" >/dev/null 2>&1 || \
	  echo "make streams-adapter: no class-data archive (the adapter starts without it, more slowly)" >&2
	@touch "$@" "$(STREAMS_ADAPTER_TARGET)/.built"
	@echo "streams adapter: kafka-streams $(STREAMS_VERSION); run it with --transport exec:$(STREAMS_ADAPTER_OUT)/fencecheck-streams-adapter"

streams-adapter-clean:
	rm -rf "$(STREAMS_ADAPTER_DIR)/target" "$(STREAMS_ADAPTER_DIR)/versions"
