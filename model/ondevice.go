package model

import (
	"fmt"
	"math/rand/v2"

	"github.com/hone-rl/hone/kernels"
)

// deviceTile is how many random values NewOnDevice makes on the host: a
// prime, so that no matrix's rows repeat in step with its width.
const deviceTile = 1<<20 - 3

// NewOnDevice builds a model with random weights made on the device, for
// benchmarks: the base matrices (the embedding, the LM head and every
// projection) are stored as weights (kernels.F32 or kernels.BF16) and
// filled with N(0, 0.02) values, norms are 1, biases 0. The host draws one
// block of deviceTile values and uploads it once; each matrix is then
// filled by device copies of it (from a random offset, then doubling what
// is filled: about log2(len/deviceTile) copies), so an 8B model's weights
// cost the host a few milliseconds and the device a pass over its memory,
// not minutes of host random numbers and a float32 upload of every weight.
// The values repeat with period deviceTile within a matrix: weights to
// measure speed with, unlike New's independent draws.
func NewOnDevice(cfg *Config, be kernels.Backend, weights kernels.DType, seed int64) (*Model, error) {
	m, err := newModel(cfg, be)
	if err != nil {
		return nil, fmt.Errorf("new model: %w", err)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x686f6e65))
	host := make([]float32, deviceTile)
	for i := range host {
		host[i] = float32(0.02 * rng.NormFloat64())
	}
	tile := be.UploadT(weights, host, deviceTile)
	defer be.Free(tile)
	for _, s := range specs(m.cfg) {
		var t kernels.Tensor
		switch s.init {
		case "normal":
			t = be.NewT(weights, s.shape...)
			fillFromTile(be, t, tile, rng.IntN(deviceTile))
		case "ones":
			t = be.New(s.shape...)
			be.Fill(t, 1)
		default:
			t = be.New(s.shape...)
		}
		*s.slot(m) = t
	}
	m.finish()
	if err := be.Err(); err != nil {
		m.Free()
		return nil, fmt.Errorf("new model on the device: %w", err)
	}
	return m, nil
}

// fillFromTile fills t with tile's values from offset off (wrapping), then
// copies what it filled onto the rest of t, doubling each time.
func fillFromTile(be kernels.Backend, t, tile kernels.Tensor, off int) {
	n, k := t.Len(), min(t.Len(), tile.Len())
	first := min(k, tile.Len()-off)
	be.Copy(be.View(t, 0, first), be.View(tile, off, first))
	if first < k {
		be.Copy(be.View(t, first, k-first), be.View(tile, 0, k-first))
	}
	for k < n {
		c := min(k, n-k)
		be.Copy(be.View(t, k, c), be.View(t, 0, c))
		k += c
	}
}
