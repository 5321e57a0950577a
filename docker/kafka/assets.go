// Package kafka holds the assets for running Apache Kafka brokers from the
// jars that `make kafka` fetches with docker/kafka/pom.xml: the broker log
// configurations, embedded so a fencecheck binary needs nothing else from the
// source tree.
package kafka

import _ "embed"

// Log4j2Properties is the log configuration of 4.x brokers (log4j2), passed
// with -Dlog4j2.configurationFile.
//
//go:embed log4j2.properties
var Log4j2Properties []byte

// Log4jProperties is the log configuration of 3.x brokers (reload4j),
// passed with -Dlog4j.configuration=file:….
//
//go:embed log4j.properties
var Log4jProperties []byte
