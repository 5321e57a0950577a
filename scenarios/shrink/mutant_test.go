package shrink

// mutantName is the transport whose failing runs the tests shrink, on kfake and on Kafka
// (external_kafka_test.go).
const mutantName = "mutant:ack-fenced"
