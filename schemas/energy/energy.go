// Package energy is the one rule for a sample's energy: the increase of its GPU's total
// energy counter (nvmlDeviceGetTotalEnergyConsumption) over the tick, and mean power × time
// only where the counter cannot say. The collector stores what it returns per raw sample and
// sums it in the rollups; attribution reads those sums, so every path bills the same joules.
package energy

import (
	"math"
	"time"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// MaxWatts bounds the mean power a counter increase may imply. No GPU draws 10 kW; an increase
// above it is a bad reading (a counter that jumped), which would put the GPU's energy of days
// in one tick of one bill, so the tick is estimated from its power instead.
const MaxWatts = 10000

// maxInterval is the longest time a sample covers (schemas/validate, tables.MaxInterval): the
// estimate never stands for more, as every other figure of the sample.
const maxInterval = 60 * time.Second

// Of returns the energy of the sample's GPU during the sample's tick, in joules, and whether it
// is estimated (power_watts × interval) rather than read from the counter:
//   - counter read at both ends (energy_mj and energy_prev_mj > 0): energy_mj − energy_prev_mj;
//   - counter below its previous reading (reset by a driver reload within the tick): energy_mj,
//     what it counted since the reset, the part of the tick that is known;
//   - counter missing (energy_unavailable, or 0: an exporter older than the field or the GPU's
//     first tick, which has no previous reading), or an increase above MaxWatts × interval:
//     estimated.
//
// A counter that genuinely reads 0 mJ (the instant the driver loaded) is taken as missing: one
// tick estimated, rather than a field that older exporters leave at 0 read as a reading.
func Of(s *pb.Sample) (joules float64, estimated bool) {
	return Tick(s.GetEnergyMj(), s.GetEnergyPrevMj(), s.GetEnergyUnavailable(), s.GetPowerWatts(), s.GetIntervalNs())
}

// Tick is Of from a sample's fields, for the collector, which decodes samples without the
// generated type: the counter at the tick (curMJ) and at the previous tick (prevMJ), whether it
// was unavailable, the power and the interval (ns).
func Tick(curMJ, prevMJ uint64, unavailable bool, watts float64, intervalNs uint64) (joules float64, estimated bool) {
	iv := time.Duration(min(intervalNs, uint64(maxInterval)))
	if !unavailable && curMJ > 0 && prevMJ > 0 {
		inc := curMJ - prevMJ
		if curMJ < prevMJ {
			inc = curMJ
		}
		j := float64(inc) / 1000
		if j <= MaxWatts*iv.Seconds() {
			return j, false
		}
	}
	return Estimate(watts, iv), true
}

// Estimate is the energy of a tick without a counter: mean power × the time it covers. A power
// that is not a finite non-negative number (the validator refuses such samples) gives 0.
func Estimate(watts float64, interval time.Duration) float64 {
	if math.IsNaN(watts) || math.IsInf(watts, 0) || watts < 0 {
		return 0
	}
	return watts * interval.Seconds()
}
