# mk/java-adapter.mk: build the Java reference adapter of the exec protocol
# (adapters/java, docs/exec-protocol.md): the seed's transport on Apache Kafka's own
# kafka-clients, the same version as the broker of `make kafka`.
#
#   make java-adapter                 # then: --transport exec:adapters/java/fencecheck-java-adapter
#
# Maven fetches kafka-clients $(KAFKA_VERSION) and Jackson from Maven Central into
# adapters/java/target/libs (offline when ~/.m2 has them, as after `make kafka`); javac
# compiles into adapters/java/target/classes. Included from the Makefile after mk/kafka.mk.

JAVA_ADAPTER_DIR := $(KAFKA_MK_ROOT)/adapters/java
JAVA_ADAPTER_SRC := $(shell find $(JAVA_ADAPTER_DIR)/src -name '*.java' 2>/dev/null)
JAVA_ADAPTER_STAMP := $(JAVA_ADAPTER_DIR)/target/.built-$(KAFKA_VERSION)

.PHONY: java-adapter java-adapter-clean
java-adapter: $(JAVA_ADAPTER_STAMP)

$(JAVA_ADAPTER_STAMP): $(JAVA_ADAPTER_SRC) $(JAVA_ADAPTER_DIR)/pom.xml
	@command -v javac >/dev/null 2>&1 || { echo "make java-adapter: javac not found; install a JDK 17 (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
	@command -v $(firstword $(MVN)) >/dev/null 2>&1 || { echo "make java-adapter: Maven ($(MVN)) not found; install it (apt-get install maven)" >&2; exit 1; }
	@rm -rf "$(JAVA_ADAPTER_DIR)/target" && mkdir -p "$(JAVA_ADAPTER_DIR)/target/classes"
	@set -- -q -B -Dstyle.color=never -f "$(JAVA_ADAPTER_DIR)/pom.xml" -Dkafka.version=$(KAFKA_VERSION) \
	  -Dadapter.libs="$(JAVA_ADAPTER_DIR)/target/libs" dependency:copy-dependencies; \
	{ $(MVN) -o "$$@" >/dev/null 2>&1 || $(MVN) "$$@"; } || { \
	  echo "make java-adapter: Maven could not fetch org.apache.kafka:kafka-clients:$(KAFKA_VERSION) (is Maven Central reachable?)" >&2; exit 1; }
	javac -Xlint:all -Werror -d "$(JAVA_ADAPTER_DIR)/target/classes" -cp "$(JAVA_ADAPTER_DIR)/target/libs/*" $(JAVA_ADAPTER_SRC)
	@touch "$@" "$(JAVA_ADAPTER_DIR)/target/.built"
	@echo "java adapter: kafka-clients $(KAFKA_VERSION); run it with --transport exec:$(JAVA_ADAPTER_DIR)/fencecheck-java-adapter"

java-adapter-clean:
	rm -rf "$(JAVA_ADAPTER_DIR)/target"
