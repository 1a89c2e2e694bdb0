package kernels

// Sampling is one row's sampling parameters: Temperature <= 0 is greedy,
// TopK <= 0 (or >= the vocabulary) and TopP >= 1 are off, Seed picks the
// draw (counter-based: the same seed and row give the same token on every
// backend, up to float rounding at the boundary between two tokens).
//
// A row's order is larger logits first, ties by the smaller id. With top-k
// on, the draw is over the first min(TopK, MaxSampleCandidates) of the
// order, top-p keeping the shortest prefix of those that holds TopP of
// their mass, walked in order. With top-k off, top-p keeps the shortest
// prefix of the whole row's order that holds TopP of the row's mass (every
// token when TopP >= 1), however many tokens that is, and the draw walks
// the kept tokens by id.
type Sampling struct {
	Temperature, TopP float32
	TopK              int32
	Seed              uint64
}

// SampleOut is what Sample returns per row: the token, its log-probability
// under the raw logits, and the TopN best raw log-probabilities with their
// ids ([rows*TopN], best first, ties by the smaller id).
type SampleOut struct {
	Tokens  []int32
	Logp    []float32
	TopIDs  []int32
	TopLogp []float32
}

// MaxSampleCandidates bounds top-k and the top-N log-probabilities: top-k
// above it is capped to it (the candidates of a top-k draw are kept in
// order, 256 at most); top-p without top-k is not bounded by it.
const MaxSampleCandidates = 256

// Sampler is a backend that draws tokens next to the logits, so a decode
// step moves rows*(2+2*topN) numbers to the host instead of rows*vocab.
// Every backend of hone implements it; the algorithm is the one of
// kernels/cuda/csrc/sample.cu (Sampling says what is drawn from; the draw
// is a splitmix64 of seed and row times the kept mass), and
// kernels/conformance holds each backend to a float64 reference of it.
type Sampler interface {
	// Sample draws one token per row of logits [rows, vocab]; params has
	// one entry per row, 0 <= topN <= min(vocab, MaxSampleCandidates).
	Sample(logits Tensor, params []Sampling, topN int) SampleOut
}

// SplitMix64 is the draw's counter-based generator: a row's uniform number
// is SplitMix64(seed ^ SplitMix64(row)) >> 40, over 2^24.
func SplitMix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// SampleUniform is row's uniform number in [0, 1) for seed.
func SampleUniform(seed uint64, row int) float64 {
	return float64(SplitMix64(seed^SplitMix64(uint64(row)))>>40) / (1 << 24)
}
