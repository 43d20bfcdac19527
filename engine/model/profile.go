package model

import "time"

// StepProfile says where the forward passes of a State spent their wall
// time since EnableProfile, as the calling goroutine sees it: the pool
// jobs by kind (its own share of the work, then waiting for the workers
// to finish theirs: imbalance, wake-up latency, a worker the OS did not
// run), and the rest (norms, rope, the cache writes, SiLU, residual adds,
// embedding lookups), which the caller runs alone.
type StepProfile struct {
	Passes int           // Forward, ForwardRows and Logits calls
	Tokens int           // tokens run through the layers
	Total  time.Duration // wall time inside those calls
	Jobs   [jobKinds]JobProfile
}

// The kinds of pool jobs.
const (
	JobProducts  = iota // matrix products
	JobQuantize         // activation quantization of a batch
	JobAttention        // attention over the cache
	jobKinds
)

// JobProfile is one kind of pool job.
type JobProfile struct {
	Runs     int           // pool jobs
	Parallel int           // of them handed to the workers
	Own      time.Duration // the caller's share of the work
	Wait     time.Duration // waiting for the workers after it
}

// Serial is the time spent outside pool jobs.
func (p *StepProfile) Serial() time.Duration {
	d := p.Total
	for _, j := range p.Jobs {
		d -= j.Own + j.Wait
	}
	return d
}

// EnableProfile starts (on) or stops collecting a StepProfile; starting
// clears it. Profiling reads the clock a few times per pool job.
func (s *State) EnableProfile(on bool) {
	if !on {
		s.prof = nil
		s.pool.prof = nil
		return
	}
	s.prof = &StepProfile{}
	s.pool.prof = &s.prof.Jobs
}

// StepProfile returns what EnableProfile collected so far.
func (s *State) StepProfile() StepProfile {
	if s.prof == nil {
		return StepProfile{}
	}
	return *s.prof
}

// profStart and profEnd bracket a pass when profiling.
func (s *State) profStart() time.Time {
	if s.prof == nil {
		return time.Time{}
	}
	return time.Now()
}

func (s *State) profEnd(t0 time.Time, tokens int) {
	if s.prof == nil {
		return
	}
	s.prof.Passes++
	s.prof.Tokens += tokens
	s.prof.Total += time.Since(t0)
}
