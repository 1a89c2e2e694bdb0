package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/config"
	"github.com/hone-rl/hone/proxy"
	"github.com/hone-rl/hone/rollout"
	"github.com/hone-rl/hone/trainer"
	"github.com/hone-rl/hone/trainer/gpu"
	"github.com/hone-rl/hone/trainer/publish"
	"github.com/prometheus/client_golang/prometheus"
)

// inProcessTrainer is the trainer loop run by hone serve --train.
type inProcessTrainer struct {
	t      *trainer.Trainer
	pub    *publish.Publisher
	cancel context.CancelFunc
	done   chan struct{}
	log    io.Closer
	// closeBackend releases the compute backend (a GPU context).
	closeBackend func()
}

func (t *inProcessTrainer) stop() {
	t.cancel()
	<-t.done
	t.pub.Wait()
	if t.closeBackend != nil {
		t.closeBackend()
	}
	if t.log != nil {
		_ = t.log.Close()
	}
}

// useRollouts makes each published version a rollout candidate: the
// publisher applies the decisions, and the trainer goes back to the
// incumbent's weights after a rollback.
func (t *inProcessTrainer) useRollouts(m *rollout.Manager) {
	t.pub.Rollouts = m
	m.OnDecision(t.pub.Decided)
	m.OnDecision(func(r rollout.Rollout) {
		if r.Decision == rollout.RolledBack {
			t.t.Revert(r.Incumbent.Version)
		}
	})
}

// startRollouts starts the guarded rollouts when rollout.enabled is set:
// the state in the trace store, routing on the data plane, each session
// that becomes ready counted for the version that served it, max_wait and
// saving on a ticker.
func startRollouts(ctx context.Context, c *config.Config, store *capture.Store, srv *proxy.Server,
	reg prometheus.Registerer, log *slog.Logger) (*rollout.Manager, error) {
	if !c.Rollout.Enabled {
		return nil, nil
	}
	m, err := rollout.New(c.Rollout, store, log)
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	if err := reg.Register(rollout.NewCollector(m)); err != nil {
		return nil, fmt.Errorf("rollout metrics: %w", err)
	}
	srv.SetRollouts(m)
	store.OnReady(func(rs capture.ReadySession) {
		if p, ok := srv.Aliases().Lookup(rs.Model); ok {
			m.ObserveSession(p.Alias, rs.Reward, rs.Versions)
		}
	})
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				m.Tick() // save the last evidence
				return
			case <-t.C:
				m.Tick()
			}
		}
	}()
	return m, nil
}

// startTrainer starts the in-process trainer when trainer.enabled is set:
// experiences from the local store, versions published to every engine of
// the pool and swapped into the proxy's alias table.
func startTrainer(ctx context.Context, c *config.Config, store *capture.Store, srv *proxy.Server,
	reg prometheus.Registerer, log *slog.Logger) (*inProcessTrainer, error) {
	if !c.Trainer.Enabled {
		return nil, nil
	}
	modelDir := c.Embedded.ModelDir
	if modelDir == "" {
		modelDir = c.Model
	}
	if modelDir == "" {
		return nil, errors.New("trainer: the base model folder is needed to train: set model (--model) to the " +
			"folder the engines serve (config.json + safetensors)")
	}
	be, err := openTrainerBackend(ctx, c.Trainer.Backend, log)
	if err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	if err := fitMicroBatches(&c.Trainer, be, modelDir, log); err != nil {
		be.Close()
		return nil, fmt.Errorf("trainer: %w", err)
	}
	pol, err := trainer.LoadPolicy(modelDir, be.Backend, c.Trainer)
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("trainer: %w", err)
	}
	pub := &publish.Publisher{Aliases: srv.Aliases(), Log: log}
	for _, e := range c.Proxy.Upstream.Engines {
		pub.Engines = append(pub.Engines, publish.Engine{URL: e.URL, Kind: e.Kind, APIKey: c.Proxy.Upstream.APIKey})
	}
	d := trainer.Deps{Policy: pol, Sources: []trainer.Source{trainer.StoreSource{Store: store}}, Publisher: pub,
		GPU: gpu.Open(), Registry: reg, BaseModel: filepath.Base(filepath.Clean(modelDir)), ModelDir: modelDir, Log: log}
	it := &inProcessTrainer{pub: pub, done: make(chan struct{}), closeBackend: be.Close}
	if c.Trainer.MetricsLog != "" {
		f, err := os.OpenFile(c.Trainer.MetricsLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("trainer: open metrics log: %w", err)
		}
		d.Metrics, it.log = f, f
	}
	if it.t, err = trainer.New(c.Trainer, d); err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	tctx, cancel := context.WithCancel(ctx)
	it.cancel = cancel
	go func() {
		defer close(it.done)
		if err := it.t.Run(tctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("trainer stopped", "err", err)
		}
	}()
	log.Info("trainer running in-process", "alias", c.Trainer.Name, "batch_sessions", c.Trainer.BatchSessions,
		"algorithm", c.Trainer.Advantage.Algorithm, "checkpoints", c.Trainer.CheckpointDir)
	return it, nil
}
