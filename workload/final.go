package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/transport"
)

// FinalProcess is the process name of the final reads in the history.
const FinalProcess = "final"

// Final reads: how many logs are read at once, and how often a failed read is tried.
const (
	finalWorkers  = 4
	finalAttempts = 5
	finalRetry    = time.Second
)

// FinalReads reads every role's lease log and every work partition once more, recording each
// as a final read: the reference committed logs the checker compares everything with. Call
// it after Run, once the runner has healed every fault and the cluster is healthy. It uses a
// transport of its own on the cluster's bootstrap addresses, without links, so the reference
// does not depend on any process's links. A failed read is tried again (every attempt is
// recorded) up to 5 times or until ctx ends. Then each process reads, once more and through
// its own transport, every log or, in a fleet, the logs settledLogs gives it (settledReads).
// The history is synced to stable storage at the end. The error names the logs that could
// not be read; without them the run is inconclusive.
func (wl *Workload) FinalReads(ctx context.Context) error {
	tr, err := transport.Start(ctx, wl.transportConfig(FinalProcess))
	if err != nil {
		return fmt.Errorf("final reads: %w", err)
	}
	defer func() { _ = tr.Close(context.WithoutCancel(ctx)) }()

	logs := make([]history.LogID, 0, len(wl.roles)+int(wl.cfg.workPartitions()))
	for _, r := range wl.roles {
		logs = append(logs, history.RoleLog(r))
	}
	for p := range wl.cfg.workPartitions() {
		logs = append(logs, history.WorkLog(p))
	}
	stopFlush := wl.flushLoop()
	jobs := make(chan history.LogID)
	var (
		mu       sync.Mutex
		unread   []string
		finalLen = map[history.LogID]int{} // records each final read returned
		wg       sync.WaitGroup
	)
	for range min(finalWorkers, len(logs)) {
		cl := wl.rec.newClient(tr, FinalProcess, "")
		wg.Go(func() {
			for l := range jobs {
				n, err := wl.finalRead(ctx, cl, l)
				mu.Lock()
				if err != nil {
					unread = append(unread, fmt.Sprintf("%s (%v)", l, err))
				} else {
					finalLen[l] = n
				}
				mu.Unlock()
			}
		})
	}
	for _, l := range logs {
		jobs <- l
	}
	close(jobs)
	wg.Wait()
	wl.settledReads(ctx, logs, finalLen)
	stopFlush()

	err = wl.rec.failed()
	if len(unread) > 0 {
		err = errors.Join(err, fmt.Errorf("final reads: %d of %d logs unread: %s", len(unread), len(logs), strings.Join(unread, "; ")))
	}
	return errors.Join(err, wl.rec.w.Sync())
}

// finalRead reads one log, trying again after a failure. It first waits until no transaction
// is open on the log's partition: a commit is acknowledged before its markers reach the
// partition, and a read that stopped at an earlier last stable offset would report an
// acknowledged write as lost. Transactions a dead holder left open end at their timeout.
func (wl *Workload) finalRead(ctx context.Context, cl *client, l history.LogID) (records int, err error) {
	topic, partition := wl.workTopic, l.Partition
	if !l.Work {
		topic, partition = wl.cfg.topic(), transport.PartitionFor(transport.Role(l.Role), wl.cfg.TopicPartitions)
	}
	// An open transaction lasts at most its timeout (the lease) plus the coordinator's abort
	// sweep; wait a little longer than that, then read what there is.
	wctx, cancel := context.WithTimeout(ctx, 2*wl.cfg.Lease.D()+wl.cfg.RequestTimeout.D())
	err = cl.tr.WaitStable(wctx, topic, partition)
	cancel()
	if err != nil {
		// Read anyway: the checker judges what the read returns, and says what is missing.
		wl.log.Warn("final read before the log was stable", "log", l.String(), "err", err)
	}
	for attempt := 1; attempt <= finalAttempts; attempt++ {
		if l.Work {
			var recs []history.Record
			recs, err = cl.ReadWork(ctx, history.KindFinalRead, wl.workTopic, l.Partition)
			records = len(recs)
		} else {
			var rr transport.RoleRecords
			rr, err = cl.ReadRole(ctx, history.KindFinalRead, l.Role)
			records = len(rr.Registrations) + len(rr.Leases)
		}
		if err == nil || attempt == finalAttempts || !sleep(ctx, nil, finalRetry) {
			return records, err
		}
	}
	return records, err
}

// Settled reads: how often a process reads a settled log that came back short, and how many
// process-log pairs they may cover in all before a process reads less than every log (see
// settledLogs; a read that comes back short is tried again on top of that).
const (
	settledAttempts = 3
	settledRetry    = 100 * time.Millisecond
	settledBudget   = 20_000
)

// settledLogs returns the logs each process reads after the final reads. Every process reads
// every log, unless that comes to more than settledBudget process-log pairs (a fleet): then
// every process reads the logs it worked on (its roles' lease logs and their work
// partitions), and the processes with a reader, in the readers' order, read every log while
// the budget lasts, the first of them in any case. Each read scans its role's whole
// partition, so a 2,000-process fleet of 400 roles would otherwise make 1.6 million reads
// (minutes after the run, most of its history), mostly of logs the reading process never
// touched. The price: a process that neither worked on a log nor made the cut no longer
// reads it settled, so a fault in one process's own read path (an exec transport keeps state
// per process) shows only in the logs that process reads.
func (wl *Workload) settledLogs(logs []history.LogID) map[*process][]history.LogID {
	out := make(map[*process][]history.LogID, len(wl.procs))
	if len(wl.procs)*len(logs) <= settledBudget {
		for _, p := range wl.procs {
			out[p] = logs
		}
		return out
	}
	at := make(map[history.LogID]int, len(logs)) // a log's place in logs
	for i, l := range logs {
		at[l] = i
	}
	own := make(map[*process][]int, len(wl.procs)) // places of the logs each process worked on
	for _, m := range wl.members {
		for _, l := range []history.LogID{history.RoleLog(m.role), history.WorkLog(m.workP)} {
			if i, ok := at[l]; ok && !slices.Contains(own[m.proc], i) {
				own[m.proc] = append(own[m.proc], i)
			}
		}
	}
	total := 0
	for _, p := range wl.procs {
		slices.Sort(own[p]) // in the order of logs, as every process reads them
		for _, i := range own[p] {
			out[p] = append(out[p], logs[i])
		}
		total += len(out[p])
	}
	all := map[*process]bool{}
	for _, r := range wl.readers {
		p := r.proc
		if all[p] {
			continue
		}
		more := len(logs) - len(out[p])
		if len(all) > 0 && total+more > settledBudget {
			break
		}
		out[p], all[p] = logs, true
		total += more
	}
	return out
}

// settledReads has each process read its logs (every log, or those settledLogs gives it in a
// fleet) once more through its own transport, after the final reads: nothing is written any
// more and every log is stable, so each read must return the whole final log (the checker's
// read-prefix says so). It is the one moment a read that drops records can be told from one
// that began before the last commits: during the run, a short read is just an earlier
// prefix. A read that comes back shorter than the final read is tried again a few times,
// since a partition leader that just took over may briefly report an older last stable
// offset; every attempt is recorded, and the checker judges the last. Failures are only
// recorded: these reads are not the reference.
func (wl *Workload) settledReads(ctx context.Context, logs []history.LogID, finalLen map[history.LogID]int) {
	var wg sync.WaitGroup
	perProc := wl.settledLogs(logs)
	for _, p := range wl.procs {
		cl := wl.rec.newClient(p.tr, p.name, "")
		wg.Go(func() {
			for _, l := range perProc[p] {
				want, ok := finalLen[l]
				if !ok {
					continue // no reference to be complete against
				}
				for attempt := 1; attempt <= settledAttempts; attempt++ {
					n := -1
					if l.Work {
						if recs, err := cl.ReadWork(ctx, history.KindRead, wl.workTopic, l.Partition); err == nil {
							n = len(recs)
						}
					} else if rr, err := cl.ReadRole(ctx, history.KindRead, l.Role); err == nil {
						n = len(rr.Registrations) + len(rr.Leases)
					}
					if n >= want || attempt == settledAttempts || !sleep(ctx, nil, settledRetry) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
}
