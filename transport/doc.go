// Package transport is fencecheck's subject: the seed's BrokerTransport, a leader-election
// transport on Kafka, built on franz-go.
//
// # Model
//
// A role is a leadership slot. Role R maps to the transactional id Topic+"/"+R and to one
// partition of the coordination topic, PartitionFor(R, partitions) (FNV-1a of the name). One
// BrokerTransport stands for one process and serves every role a member of that process plays.
//
//   - Register appends a registration on a plain idempotent producer, outside transactions; its
//     offset is the member's join sequence.
//   - AcquireEpoch builds the role's transactional producer and sends InitProducerId. The
//     coordinator mints a (producer id, epoch) pair, the fencing token, and fences every earlier
//     producer of the transactional id. The token is read from the producer that minted it.
//   - WriteLease (and WriteFenced, for a holder's application records) writes in a transaction
//     on the producer bound to the token. The broker's epoch check rejects a deposed holder.
//   - ReadRoleRecords scans the role's partition at read_committed up to the last stable offset
//     taken when the scan starts.
//   - Describe asks the coordinator (DescribeTransactions) which pair holds the role now, and
//     has up to two other brokers confirm (FindCoordinator) that the broker that answered is
//     still the coordinator: a broker cut from its peers answers from its old state. The
//     answer is advisory; the token, which the broker checks on every write, is the authority.
//
// Under transaction version 2 (KIP-890 part 2) every commit bumps the producer's epoch, so
// Describe reports the minted epoch plus the number of commits; the minted token stays the
// identity of the holding (what records carry, what HeldToken returns). Under TV1 the epoch
// stays at the minted value until the next InitProducerId or a timeout abort.
//
// # Bounded calls and outcomes
//
// Every call ends within its context and Config.RequestTimeout. franz-go's in-flight produces
// and commits ignore their context, so the transport waits on its own timer and, on expiry,
// closes the producer involved. Classify tells what a failed call means: Fail (certainly no
// effect) or Unknown (may have taken effect). A write whose commit was never requested is
// Fail: its transaction can only be aborted. A write whose commit went out and was not
// confirmed is Unknown. An acquire that failed after sending is Unknown: InitProducerId may
// have minted. After any failed write the holding is gone (its producer is closed), because a
// producer whose transaction failed cannot be trusted to hold the epoch.
//
// # Record format (version 1)
//
// Keys and values start with the magic byte 0xFC and a version byte (package record, which
// this package re-exports, has the format byte by byte). A key names the role; a value is a
// registration (member), a lease (minted token, holder, seq, duration, written-at) or a work
// record (minted token, member, write id, payload). Readers drop records whose key is not a
// fencecheck key or names another role; a record of the role whose value does not decode is
// ErrRecord.
package transport
