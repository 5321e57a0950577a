package links

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// answerFrame is a whole response frame of resp (flexible versions with the header's tags)
// with correlation id corr.
func answerFrame(resp kmsg.Response, corr int32) []byte {
	frame := []byte{0, 0, 0, 0, byte(corr >> 24), byte(corr >> 16), byte(corr >> 8), byte(corr)}
	if resp.IsFlexible() {
		frame = append(frame, 0)
	}
	frame = resp.AppendTo(frame)
	n := len(frame) - 4
	frame[0], frame[1], frame[2], frame[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return frame
}

// BenchmarkObserveAnswer is the CPU an observed request and its answer cost a connection
// (kafkaConn.ask, then kafkaConn.answered: the lookup by correlation id and the decoding of
// the answer's error code), without a network, so that the figure is not lost in a round
// trip's noise: EndTxn (a small answer) and Produce (one partition).
func BenchmarkObserveAnswer(b *testing.B) {
	endReq := kmsg.NewPtrEndTxnRequest()
	endReq.SetVersion(4)
	endResp := kmsg.NewPtrEndTxnResponse()
	endResp.SetVersion(4)
	prodReq := kmsg.NewPtrProduceRequest()
	prodReq.SetVersion(11)
	prodResp := kmsg.NewPtrProduceResponse()
	prodResp.SetVersion(11)
	topic := kmsg.NewProduceResponseTopic()
	topic.Topic = "fencecheck.bench.work"
	topic.Partitions = append(topic.Partitions, kmsg.NewProduceResponseTopicPartition())
	prodResp.Topics = append(prodResp.Topics, topic)
	for _, c := range []struct {
		name string
		req  kmsg.Request
		resp kmsg.Response
	}{{"endtxn", endReq, endResp}, {"produce", prodReq, prodResp}} {
		b.Run(c.name, func(b *testing.B) {
			k := &kafkaFaults{}
			conn := &kafkaConn{k: k}
			req := kmsg.NewRequestFormatter(kmsg.FormatterClientID("p1")).AppendRequest(nil, c.req, 5)
			resp := answerFrame(c.resp, 5)
			b.ReportAllocs()
			for range b.N {
				conn.ask(req)
				conn.answered(resp, 5, 0)
			}
			if !k.answers[c.req.Key()][1].Load() {
				b.Fatal("the answer was not observed")
			}
		})
	}
}
