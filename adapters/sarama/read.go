package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// readerClient returns the shared client of the reads, building it if needed.
func (a *adapter) readerClient() (sarama.Client, error) {
	a.readMu.Lock()
	defer a.readMu.Unlock()
	if a.closed.Load() {
		return nil, errors.New("transport closed")
	}
	if a.reader != nil && !a.reader.Closed() {
		return a.reader, nil
	}
	c, err := sarama.NewClient(a.addrs, a.readerConfig())
	if err != nil {
		return nil, err
	}
	a.reader = c
	return c, nil
}

// resetReader drops the shared reader client after a read failed, so that the next read
// starts on fresh connections and fresh metadata.
func (a *adapter) resetReader(c sarama.Client) {
	a.readMu.Lock()
	if a.reader == c {
		a.reader = nil
	}
	a.readMu.Unlock()
	go func() { _ = c.Close() }()
}

// read returns every committed record of the partition from its log start up to the last
// stable offset (LSO) taken when the read starts, in offset order.
//
//   - The LSO: Sarama's Client.GetOffset sends ListOffsets without an isolation level
//     (read_uncommitted), which answers the high watermark. So the adapter sends the
//     ListOffsets itself through Sarama's public request API: NewOffsetRequest with
//     IsolationLevel ReadCommitted, to the partition's leader (Client.Leader), with
//     Broker.GetAvailableOffsets. Under read_committed its latest offset is the LSO.
//   - The records: Sarama's read_committed consumer (NewConsumerFromClient,
//     Consumer.IsolationLevel ReadCommitted, ConsumePartition from OffsetOldest), which drops
//     aborted transactions and control records itself.
//   - Where to stop: Sarama's PartitionConsumer does not expose its position (its next fetch
//     offset is unexported; HighWaterMarkOffset is the high watermark), and below the LSO the
//     log of a transactional partition always ends in a commit or abort marker, which has an
//     offset and no record: waiting for a record at LSO-1 would never end. So before
//     consuming, the adapter finds the last offset below the LSO that holds a record the
//     consumer delivers (lastDeliverable: read_committed Fetches, Sarama's FetchRequest and
//     its decoding, walking back batch by batch from LSO-1 over control batches and batches
//     of aborted transactions), and the read ends when the consumer has delivered it. Nothing
//     deliverable: the read is empty. The walk decides only where to stop; the records are the
//     consumer's, and a consumer that skipped the last record would leave the read to time
//     out (a failed read), never end it early.
func (a *adapter) read(topic string, partition int32) ([]read, *callError) {
	// The read's own deadline comes a little before the call's, so that a read that cannot
	// finish says how far it got and what Sarama said.
	ctx, cancel := context.WithTimeout(context.Background(), a.rt-min(a.rt/10, 250*time.Millisecond))
	defer cancel()
	timer := time.NewTimer(a.rt)
	defer timer.Stop()
	type result struct {
		recs []read
		err  *callError
	}
	ch := make(chan result, 1)
	go func() {
		recs, err := a.readOnce(ctx, topic, partition)
		ch <- result{recs, err}
	}()
	select {
	case r := <-ch:
		return r.recs, r.err
	case <-timer.C:
		// readOnce ends on its own once it sees ctx done; a blocking Sarama call in it ends by
		// its own timeouts. The reads have no effect: fail.
		return nil, fail(kindClient, fmt.Sprintf("read %s/%d: not complete within the request timeout %v", topic, partition, a.rt))
	}
}

// readOnce reads once, again on a new client if the shared one was closed under it (another
// read failed and dropped it).
func (a *adapter) readOnce(ctx context.Context, topic string, partition int32) ([]read, *callError) {
	for {
		recs, closed, cerr := a.readWith(ctx, topic, partition)
		if !closed || ctx.Err() != nil || a.closed.Load() {
			return recs, cerr
		}
		logf("read %s/%d: the shared client was closed under the read; again on a new one", topic, partition)
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return nil, cerr
		}
	}
}

func (a *adapter) readWith(ctx context.Context, topic string, partition int32) (recs []read, closed bool, cerr *callError) {
	client, err := a.readerClient()
	if err != nil {
		return nil, false, fail(kindClient, fmt.Sprintf("read %s/%d: build the client: %s", topic, partition, errText(err)))
	}
	defer func() {
		if cerr != nil {
			if client.Closed() {
				closed = true
			} else {
				a.resetReader(client)
			}
		}
	}()
	failf := func(format string, args ...any) *callError {
		return fail(kindClient, fmt.Sprintf("read %s/%d: ", topic, partition)+fmt.Sprintf(format, args...))
	}

	var start, lso, last int64
	var any bool
	for attempt := 0; ; attempt++ {
		start, lso, err = a.bounds(client, topic, partition)
		if err == nil && lso > start {
			last, any, err = a.lastDeliverable(ctx, client, topic, partition, start, lso)
		}
		if err == nil {
			break
		}
		logf("read %s/%d: offsets (attempt %d): %s", topic, partition, attempt+1, errText(err))
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return nil, false, failf("log start, last stable offset and last record: %s", errText(err))
		}
		if client.Closed() {
			return nil, true, failf("the shared client was closed")
		}
		_ = client.RefreshMetadata(topic)
	}
	recs = []read{}
	if lso <= start || !any {
		return recs, false, nil
	}

	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, false, failf("NewConsumerFromClient: %s", errText(err))
	}
	defer func() { _ = consumer.Close() }()
	pc, err := consumer.ConsumePartition(topic, partition, sarama.OffsetOldest)
	if err != nil {
		return nil, false, failf("ConsumePartition from the oldest offset: %s", errText(err))
	}
	// Close (in the background) stops the fetches and drains the errors channel; the messages
	// feeder gives up on its own once the consumer is dying.
	defer func() { go func() { _ = pc.Close() }() }()

	next := start // the offset after the last record delivered
	var lastErr error
	for {
		select {
		case msg, ok := <-pc.Messages():
			if !ok {
				return nil, false, failf("the partition consumer stopped (last error: %s)", errText(lastErr))
			}
			if msg.Offset < next {
				return nil, false, failf("the consumer delivered offset %d after %d (out of order)", msg.Offset, next-1)
			}
			if msg.Offset > last {
				// The walk back took a record for aborted (or a marker) that the consumer
				// delivers: say so; it is the consumer's records that count.
				logf("read %s/%d: the consumer delivered offset %d, after %d, the last record the walk back found below the LSO %d",
					topic, partition, msg.Offset, last, lso)
			}
			if msg.Offset >= lso {
				return recs, false, nil
			}
			recs = append(recs, read{Offset: msg.Offset, Key: msg.Key, Value: msg.Value})
			next = msg.Offset + 1
			if msg.Offset >= last {
				return recs, false, nil
			}
		case cerrMsg, ok := <-pc.Errors():
			if ok {
				lastErr = cerrMsg.Err
				logf("read %s/%d: consumer error: %s", topic, partition, errText(cerrMsg.Err))
			}
		case <-ctx.Done():
			return nil, false, failf("the consumer got to offset %d, not to %d (the last record below the last stable offset %d), within the request timeout (last consumer error: %s)",
				next, last, lso, errText(lastErr))
		}
	}
}

// bounds returns the partition's log start offset and its last stable offset.
func (a *adapter) bounds(client sarama.Client, topic string, partition int32) (int64, int64, error) {
	start, err := client.GetOffset(topic, partition, sarama.OffsetOldest)
	if err != nil {
		return 0, 0, fmt.Errorf("GetOffset(OffsetOldest): %w", err)
	}
	leader, err := client.Leader(topic, partition)
	if err != nil {
		return 0, 0, fmt.Errorf("Leader: %w", err)
	}
	req := sarama.NewOffsetRequest(kafkaVersion)
	req.IsolationLevel = sarama.ReadCommitted
	req.AddBlock(topic, partition, sarama.OffsetNewest, 1)
	resp, err := leader.GetAvailableOffsets(req)
	if err != nil {
		_ = leader.Close()
		return 0, 0, fmt.Errorf("ListOffsets(latest, read_committed): %w", err)
	}
	block := resp.GetBlock(topic, partition)
	switch {
	case block == nil:
		return 0, 0, fmt.Errorf("ListOffsets(latest, read_committed): %w", sarama.ErrIncompleteResponse)
	case !errors.Is(block.Err, sarama.ErrNoError):
		return 0, 0, fmt.Errorf("ListOffsets(latest, read_committed): %w", block.Err)
	case len(block.Offsets) != 1:
		return 0, 0, fmt.Errorf("ListOffsets(latest, read_committed): %d offsets in the answer", len(block.Offsets))
	}
	return start, block.Offsets[0], nil
}

// lastDeliverable returns the highest offset in [start, lso) of a record that a read_committed
// consumer delivers (false: none). It walks back from lso-1 one record batch at a time: a
// read_committed Fetch at offset o answers the batch that holds o first (whole, however small
// the size limit, KIP-74) and the aborted transactions that overlap [o, LSO). A control
// batch (commit or abort marker) is skipped; so is a transactional batch of a producer that
// has an aborted transaction listed with a first offset at or before the batch's last offset
// (the rule Sarama's consumer applies, consumer.go parseResponse; a producer has one open
// transaction at a time, and the broker lists only aborted transactions that end at or after
// o, so the listed one is the batch's own). The first other batch holds the answer: its
// highest record offset below lso.
func (a *adapter) lastDeliverable(ctx context.Context, client sarama.Client, topic string, partition int32, start, lso int64) (int64, bool, error) {
	leader, err := client.Leader(topic, partition)
	if err != nil {
		return 0, false, fmt.Errorf("Leader: %w", err)
	}
	for o := lso - 1; o >= start; {
		if ctx.Err() != nil {
			return 0, false, ctx.Err()
		}
		// The partition's size limit is 1 byte (one batch comes back); the request's is not:
		// kfake (franz-go pkg/kfake 01_fetch.go) leaves out a partition's aborted transactions
		// when the request's MaxBytes ends the fetch ("break full" skips the lookup), while a
		// partition limit ends it through the lookup.
		req := &sarama.FetchRequest{Version: 12, MaxWaitTime: 0, MinBytes: 0, MaxBytes: 1 << 20,
			Isolation: sarama.ReadCommitted, SessionID: 0, SessionEpoch: -1}
		req.AddBlock(topic, partition, o, 1, -1)
		resp, err := leader.Fetch(req)
		if err != nil {
			_ = leader.Close()
			return 0, false, fmt.Errorf("Fetch(read_committed) at %d: %w", o, err)
		}
		block := resp.GetBlock(topic, partition)
		if block == nil {
			return 0, false, fmt.Errorf("Fetch(read_committed) at %d: %w", o, sarama.ErrIncompleteResponse)
		}
		if !errors.Is(block.Err, sarama.ErrNoError) {
			return 0, false, fmt.Errorf("Fetch(read_committed) at %d: %w", o, block.Err)
		}
		var b *sarama.RecordBatch
		for _, recs := range block.RecordsSet {
			if recs.RecordBatch != nil && !recs.RecordBatch.PartialTrailingRecord {
				b = recs.RecordBatch
				break
			}
		}
		switch {
		case b == nil:
			return 0, false, fmt.Errorf("Fetch(read_committed) at %d (last stable offset %d): no complete record batch in the answer", o, lso)
		case b.FirstOffset > o:
			o-- // no batch holds o (a gap): look below it
			continue
		}
		skip := b.Control
		if !skip && b.IsTransactional {
			for _, t := range block.AbortedTransactions {
				if t.ProducerID == b.ProducerID && t.FirstOffset <= b.LastOffset() {
					skip = true
					break
				}
			}
		}
		if !skip {
			best, found := int64(-1), false
			for _, r := range b.Records {
				if off := b.FirstOffset + r.OffsetDelta; off < lso && off >= start && off > best {
					best, found = off, true
				}
			}
			if found {
				return best, true, nil
			}
		}
		o = b.FirstOffset - 1
	}
	return 0, false, nil
}

// controlType is the type of a control record (its key: version int16, type int16): 0 abort,
// 1 commit; -1 when the key is too short.
func controlType(key []byte) int {
	if len(key) < 4 {
		return -1
	}
	return int(int16(binary.BigEndian.Uint16(key[2:4])))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
