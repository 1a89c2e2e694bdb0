package main

import (
	"math"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// overhead is hone's hone_overhead_seconds histogram (time a call spends
// inside hone: request handling and response processing, not the hops) as
// cumulative counts per upper bound, summed over routes.
type overhead struct {
	bounds []float64
	counts []float64
}

// scrape reads a hone role's metrics; nil when there are none.
func scrape(url string) map[string]*dto.MetricFamily {
	if url == "" {
		return nil
	}
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	return fams
}

// counterSum is the sum of a counter family's series (0 when absent).
func counterSum(fams map[string]*dto.MetricFamily, name string) float64 {
	var n float64
	for _, m := range fams[name].GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return n
}

// scrapeOverhead reads the histogram from a hone role's metrics URL; the
// zero value when there is none.
func scrapeOverhead(url string) overhead {
	fams := scrape(url)
	if fams["hone_overhead_seconds"] == nil {
		return overhead{}
	}
	var o overhead
	for _, m := range fams["hone_overhead_seconds"].GetMetric() {
		for i, b := range m.GetHistogram().GetBucket() {
			if len(o.bounds) <= i {
				o.bounds = append(o.bounds, b.GetUpperBound())
				o.counts = append(o.counts, 0)
			}
			o.counts[i] += float64(b.GetCumulativeCount())
		}
	}
	return o
}

// quantile estimates the q-quantile (0..1) in µs of the calls counted
// between before and after, interpolating linearly inside a bucket as
// Prometheus' histogram_quantile does; NaN without data.
func (after overhead) quantile(before overhead, q float64) float64 {
	n := len(after.counts)
	if len(before.counts) != n { // no series before the first observed call
		before.counts = make([]float64, n)
	}
	if n == 0 || after.counts[n-1]-before.counts[n-1] <= 0 {
		return math.NaN()
	}
	total := after.counts[n-1] - before.counts[n-1]
	rank := q * total
	lowBound, lowCount := 0.0, 0.0
	for i := range after.bounds {
		c := after.counts[i] - before.counts[i]
		if c >= rank {
			if math.IsInf(after.bounds[i], 1) {
				return lowBound * 1e6
			}
			frac := (rank - lowCount) / math.Max(c-lowCount, 1e-9)
			return (lowBound + frac*(after.bounds[i]-lowBound)) * 1e6
		}
		lowBound, lowCount = after.bounds[i], c
	}
	return math.NaN()
}
