package nemesis

import "github.com/fencecheck/fencecheck/internal/units"

// Duration is the duration of scenario files, shared with the workload: a string with a unit
// ("5s"); a bare number is refused.
type Duration = units.Duration
