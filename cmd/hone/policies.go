package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hone-rl/hone/rollout"
)

func init() {
	register("policies", "show each policy alias, its versions and its guarded rollout (from a running hone)", runPolicies)
}

// policiesView is GET /admin/policies as hone policies reads it.
type policiesView struct {
	Policies []struct {
		Alias    string           `json:"alias"`
		Target   string           `json:"target"`
		Version  int64            `json:"version"`
		InFlight int              `json:"in_flight"`
		Names    []string         `json:"names"`
		Rollout  *rollout.Rollout `json:"rollout"`
	} `json:"policies"`
}

func runPolicies(ctx context.Context, args []string) error {
	fs := newFlags("policies", "policies [--control URL] [--token T]",
		"Prints each policy alias of a running hone (GET /admin/policies): the live version, the names that follow\n"+
			"it, and its guarded rollout: the candidate's share, each arm's sessions and mean reward, the decision and\n"+
			"its reason.")
	url := fs.String("control", "http://127.0.0.1:8081", "hone's control plane")
	token := fs.String("token", os.Getenv("HONE_PROXY_CONTROL_TOKEN"), "control-plane token (HONE_PROXY_CONTROL_TOKEN)")
	if err := fs.parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(*url, "/")+"/admin/policies", nil)
	if err != nil {
		return err
	}
	if *token != "" {
		req.Header.Set("Authorization", "Bearer "+*token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("is hone serve running? %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /admin/policies: %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var v policiesView
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("GET /admin/policies: %w", err)
	}
	return printPolicies(stdout, v)
}

func printPolicies(w io.Writer, v policiesView) error {
	if len(v.Policies) == 0 {
		_, err := fmt.Fprintln(w, "no policy aliases")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ALIAS\tLIVE\tTARGET\tIN FLIGHT\tNAMES")
	for _, p := range v.Policies {
		fmt.Fprintf(tw, "%s\tv%d\t%s\t%d\t%s\n", p.Alias, p.Version, p.Target, p.InFlight, strings.Join(p.Names, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range v.Policies {
		r := p.Rollout
		if r == nil {
			continue
		}
		state := r.Decision
		if state == rollout.Running {
			state = fmt.Sprintf("running, share %.0f%% (step %d)", 100*r.Share, r.Step+1)
			if r.Pinned {
				state += ", pinned"
			}
		}
		fmt.Fprintf(w, "\nrollout of %s: v%d against v%d: %s\n", r.Alias, r.Candidate.Version, r.Incumbent.Version, state)
		for i, name := range []string{"incumbent", "candidate"} {
			a := r.Arms[i]
			fmt.Fprintf(w, "  %-9s %d sessions, mean reward %.4g, %d calls, %d errors\n", name, a.N, a.Mean, a.Calls, a.Errors)
		}
		if r.Looks > 0 {
			fmt.Fprintf(w, "  last look (%d): candidate - incumbent %.4g, interval [%.4g, %.4g]\n", r.Looks, r.Diff, r.Lower, r.Upper)
		}
		if r.Reason != "" {
			fmt.Fprintf(w, "  %s\n", r.Reason)
		}
	}
	return nil
}
