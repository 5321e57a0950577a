// Package knobs lets the mutants of transport/mutant switch off one safeguard of the real
// transport that no option exposes, so a regression can show the bug the safeguard works
// around. Nothing outside the transport's own tree can import it.
package knobs

// DisableWarmUp, set by package transport, makes the *transport.BrokerTransport it is given
// produce without its first-metadata warm-up (transport/lease.go, warmUp): every producer's
// first record to a topic then takes franz-go v1.22.3's first-metadata path, whose race can
// acknowledge a record that EndTransaction never commits.
var DisableWarmUp func(tr any)

// DisableConfirm, set by package transport, makes the *transport.BrokerTransport it is given
// return Describe's answer without asking other brokers whether the broker that answered is
// still the coordinator (transport/confirm.go): a deposed coordinator's stale answer is then
// returned as it came.
var DisableConfirm func(tr any)
