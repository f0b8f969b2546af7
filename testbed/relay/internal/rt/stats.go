package rt

import "sort"

// Sample keeps up to Cap values (microseconds) with a running max, for percentile summaries.
type Sample struct {
	Cap    int
	vals   []int64
	n      int64
	max    int64
	sum    int64
	stride int64
}

// Add records one value; beyond Cap it keeps every k-th value (systematic thinning).
func (s *Sample) Add(v int64) {
	s.n++
	s.sum += v
	if v > s.max {
		s.max = v
	}
	if s.Cap <= 0 {
		s.Cap = 1 << 20
	}
	if s.stride == 0 {
		s.stride = 1
	}
	if s.n%s.stride != 0 {
		return
	}
	s.vals = append(s.vals, v)
	if len(s.vals) >= s.Cap {
		kept := s.vals[:0]
		for i := 0; i < len(s.vals); i += 2 {
			kept = append(kept, s.vals[i])
		}
		s.vals = kept
		s.stride *= 2
	}
}

// Summary is the percentile view written to JSON.
type Summary struct {
	N    int64   `json:"n"`
	Mean float64 `json:"mean"`
	P10  int64   `json:"p10"`
	P50  int64   `json:"p50"`
	P90  int64   `json:"p90"`
	P99  int64   `json:"p99"`
	Max  int64   `json:"max"`
}

// Summarize sorts a copy of the kept values and reads percentiles.
func (s *Sample) Summarize() Summary {
	out := Summary{N: s.n, Max: s.max}
	if s.n == 0 || len(s.vals) == 0 {
		return out
	}
	out.Mean = float64(s.sum) / float64(s.n)
	v := append([]int64(nil), s.vals...)
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	at := func(q float64) int64 { return v[int(q*float64(len(v)-1)+0.5)] }
	out.P10, out.P50, out.P90, out.P99 = at(0.10), at(0.50), at(0.90), at(0.99)
	return out
}
