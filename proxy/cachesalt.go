package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// proxy.cache_salt values (Options.CacheSalt).
//
// An engine's prefix cache is shared by every request it serves: a request
// whose prompt starts like one served earlier gets its first token sooner.
// Through a shared hone, one agent could time its own requests to learn
// whether another agent's prompts begin with a guessed text. vLLM salts a
// request's cached blocks with its cache_salt field: requests with
// different salts never share blocks. With client keys, hone gives every
// key a salt of its own (cache_salt owner), derived from the key, so a key's
// calls still share their prefixes while no two keys share anything; an
// agent's own cache_salt still partitions its key's cache (it is hashed with
// the key's salt, so no agent can name another key's salt). For an engine
// that refuses the field: proxy.cache_salt: off.
const (
	CacheSaltOwner = "owner"
	CacheSaltOff   = "off"
)

// keySalt is the cache_salt of a client key's calls: 40 hex digits of a hash
// of the key, so the salt is as hard to guess as the key (vLLM asks for an
// unpredictable salt) and within vLLM's limits (at most 128 characters,
// none of @ / \ NUL).
func keySalt(key string) string {
	sum := sha256.Sum256([]byte("hone-cache-salt\x00" + key))
	return "hone-" + hex.EncodeToString(sum[:20])
}

// agentSalt is the cache_salt of a call whose agent sent its own (raw: its
// JSON value) with a key whose salt is base.
func agentSalt(base, raw string) string {
	sum := sha256.Sum256([]byte(base + "\x00" + raw))
	return "hone-" + hex.EncodeToString(sum[:20])
}

// saltedRoute reports whether a forwarded call on path gets its key's
// cache_salt: the pooling routes do; tokenization and audio (a multipart
// form) are forwarded unsalted.
func saltedRoute(path string) bool { return slices.Contains(poolingRoutes, path) }

// cacheSalts maps each client key's owner id to its salt, or is nil when
// nothing is salted.
func cacheSalts(o *Options) map[string]string {
	if o.CacheSalt != CacheSaltOwner || len(o.ClientKeys) == 0 {
		return nil
	}
	m := make(map[string]string, len(o.ClientKeys))
	for _, k := range o.ClientKeys {
		m[ownerOf(k)] = keySalt(k)
	}
	return m
}
