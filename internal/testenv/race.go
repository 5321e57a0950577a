//go:build race

package testenv

// Race is true in a build with the race detector (go test -race), false otherwise.
const Race = true
