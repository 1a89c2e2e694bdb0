package config

import (
	"flag"
	"strings"

	"github.com/hone-rl/hone/proxy"
)

// ServeFlags are the command-line flags of hone serve; set flags override
// the file and the environment.
type ServeFlags struct {
	fs            *flag.FlagSet
	ConfigFile    string
	listen        string
	controlListen string
	data          string
	model         string
	engines       stringList
	train         bool
	trainBatch    int
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// NewServeFlags defines hone serve's flags on fs.
func NewServeFlags(fs *flag.FlagSet) *ServeFlags {
	f := &ServeFlags{fs: fs}
	d := Default()
	fs.StringVar(&f.ConfigFile, "config", "", "YAML config file (see config.example.yaml)")
	fs.StringVar(&f.listen, "listen", d.Proxy.Listen, "data-plane address (OpenAI API for agents)")
	fs.StringVar(&f.controlListen, "control-listen", d.Proxy.ControlListen, "control-plane address (feedback, experiences, admin, metrics)")
	fs.StringVar(&f.data, "data", d.Data, "data folder (trace store, checkpoints)")
	fs.StringVar(&f.model, "model", "", "model folder for the embedded engine, used when no --engine is given")
	fs.Var(&f.engines, "engine", "engine base URL, e.g. http://127.0.0.1:8000 (repeatable); none: the embedded engine")
	fs.BoolVar(&f.train, "train", false, "run the trainer in-process on the local store (trainer.enabled)")
	fs.IntVar(&f.trainBatch, "train-batch", d.Trainer.BatchSessions, "ready sessions per training step (trainer.batch_sessions)")
	return f
}

// Apply overrides c with the flags that were set on the command line.
func (f *ServeFlags) Apply(c *Config) {
	if c.src == nil {
		c.src = sources{}
	}
	f.fs.Visit(func(fl *flag.Flag) {
		c.src.set(flagKeys[fl.Name], "--"+fl.Name)
		switch fl.Name {
		case "listen":
			c.Proxy.Listen = f.listen
		case "control-listen":
			c.Proxy.ControlListen = f.controlListen
		case "data":
			c.Data = f.data
		case "model":
			c.Model = f.model
		case "engine":
			c.Engine.Engines = nil
			for _, u := range f.engines {
				c.Engine.Engines = append(c.Engine.Engines, engineURL(u))
			}
		case "train":
			c.Trainer.Enabled = f.train
		case "train-batch":
			c.Trainer.BatchSessions = f.trainBatch
		}
	})
}

// flagKeys maps each flag to the key it sets.
var flagKeys = map[string]string{"listen": "proxy.listen", "control-listen": "proxy.control_listen", "data": "data",
	"model": "model", "engine": "engine.engines", "train": "trainer.enabled", "train-batch": "trainer.batch_sessions"}

func engineURL(u string) proxy.EngineOptions {
	kind := ""
	if k, rest, ok := strings.Cut(u, "="); ok && !strings.Contains(k, "/") { // sglang=http://...
		kind, u = k, rest
	}
	return proxy.EngineOptions{URL: strings.TrimSuffix(u, "/v1"), Kind: kind}
}
