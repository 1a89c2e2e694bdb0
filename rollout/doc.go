// Package rollout gives a newly published policy version its traffic
// progressively and decides, from the rewards of the sessions each version
// served, whether it is promoted or rolled back: progressive delivery (Argo
// Rollouts, Flagger) for policies.
//
// Per alias, a candidate version serves a share of new sessions
// (Options.Steps), chosen by a hash of the session id and sticky: a
// session keeps the version of its first call, also across a step (Held)
// and a restart (the state is saved through Store). The incumbent serves
// the rest.
//
// The decision uses per-session rewards (one sample per rewarded session
// served wholly by one version). A look is taken each time the candidate
// has MinSessions more rewarded sessions (and the incumbent at least
// MinSessions): Welch's t gives a one-sided interval of the difference of
// mean session reward, candidate minus incumbent, each bound at level
// alpha/max_looks (Bonferroni over the looks, so a whole rollout decides
// wrongly by chance with probability at most alpha on each side):
//
//   - the candidate's call error rate above the incumbent's by more than
//     error_margin (one-sided two-proportion z-test, same level): rollback;
//   - upper bound < 0 (significantly worse): rollback;
//   - lower bound > -margin (not worse): the next step, or promotion after
//     the last one;
//   - otherwise wait for the next look; after max_looks looks, or max_wait
//     after the rollout began, an undecided candidate is rolled back.
//
// Operators pin, promote or roll back by hand (Manager.Set). Decisions go
// to the OnDecision callbacks: the publisher flips the alias or unloads
// the candidate, the trainer resumes from the incumbent after a rollback.
package rollout
