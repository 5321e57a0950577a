package checker

import (
	"fmt"
)

// checkSettledReads is the part of read-prefix that only a settled log allows: a read invoked
// after the final read of its log returned (nothing is written any more, and the log is
// stable) must return the whole final log. During the run a short read is just an earlier
// prefix; after the final read it is a read that dropped records. Of each process's reads of
// a settled log the last one counts (lastSettled): the workload reads again while a read
// comes back short, since a partition leader that just took over may briefly report an older
// end.
func (c *run) checkSettledReads(r *Result) {
	x := c.x
	for _, id := range x.logIDs {
		l := x.logs[id]
		if l.final < 0 {
			continue
		}
		finalOp := x.op(l.final)
		final := x.finalRecords(l)
		for _, rd := range x.lastSettled(l) {
			op := x.op(rd)
			n := len(op.Result.Records)
			if n >= len(final) {
				continue // more than the final log is read-prefix's other rule
			}
			r.Anomalies = append(r.Anomalies, Anomaly{
				Guarantee: ReadPrefix, Role: id.Role, Log: id.String(), Ops: x.opIDs(rd, l.final),
				Offsets: []int64{final[n].Offset},
				Explanation: fmt.Sprintf("%s op %d of %s by %s, invoked after the final read (op %d) returned, returned %d of the %d records of the settled log; the first missing is %s.",
					op.Kind, op.ID, id, op.Process, finalOp.ID, n, len(final), x.describeRecord(&final[n], l.finalWriter[n])),
			})
		}
	}
}
