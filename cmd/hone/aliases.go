package main

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/hone-rl/hone/config"
	"github.com/hone-rl/hone/proxy"
)

// Drop-in policies. The in-process trainer publishes each version under its
// policy alias (trainer.name); the names agents already send follow that
// alias, so an agent that keeps its model name gets the newest version:
//   - the engines' served name of the base model the trainer trains
//     (trainer.served_model; by default the embedded engine's served name,
//     or, with external engines, the one base model their /v1/models lists);
//   - trainer.name itself, an extra name agents may use.
// Other served models route unchanged. Several base models behind one hone
// each need their own trainer (hone train --name with the proxy's
// /admin/policies "names"), since one trainer trains one base model.

// addPolicyAlias puts the trainer's alias in the proxy's initial table with
// the served name following it (when known now).
func addPolicyAlias(c *config.Config) {
	if !c.Trainer.Enabled {
		return
	}
	base := c.Trainer.ServedModel
	if base == "" {
		base = c.Embedded.ServedModelName
	}
	for i, a := range c.Proxy.Aliases {
		if a.Name == c.Trainer.Name {
			if base != "" && !slices.Contains(a.Names, base) {
				c.Proxy.Aliases[i].Names = append(c.Proxy.Aliases[i].Names, base)
			}
			return
		}
	}
	if base == "" {
		return // external engines: linkServedModel finds the name once they answer
	}
	c.Proxy.Aliases = append(c.Proxy.Aliases, proxy.AliasConfig{Name: c.Trainer.Name, Target: base,
		Names: []string{base}})
}

// linkServedModel asks the engines for their base model until one answers,
// then makes it follow the trainer's alias. It is needed only when neither
// trainer.served_model nor the embedded engine named it. With several base
// models it logs what to set and gives up.
func linkServedModel(ctx context.Context, c *config.Config, srv *proxy.Server, log *slog.Logger) {
	if !c.Trainer.Enabled {
		return
	}
	if _, ok := srv.Aliases().Lookup(c.Trainer.Name); ok {
		return
	}
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		models, err := srv.BaseModels(ctx)
		switch {
		case err == nil && len(models) == 1:
			srv.Aliases().Swap(c.Trainer.Name, models[0], 0)
			srv.Aliases().Link(models[0], c.Trainer.Name)
			log.Info("policy alias", "alias", c.Trainer.Name, "names", srv.Aliases().Names(c.Trainer.Name))
			return
		case err == nil:
			log.Error("the engines serve several base models: set trainer.served_model to the one the trainer "+
				"trains, so agents that send it get the trained policy", "models", models)
			return
		}
		log.Debug("waiting for the engines to list their model", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// aliasedNames lists, for the banner, the model names that follow the
// trainer's policy.
func aliasedNames(c *config.Config, srv *proxy.Server) []string {
	if !c.Trainer.Enabled {
		return nil
	}
	if _, ok := srv.Aliases().Lookup(c.Trainer.Name); !ok {
		return nil
	}
	return srv.Aliases().Names(c.Trainer.Name)
}
