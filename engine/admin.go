package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
)

type modelPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

type modelCard struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        *string           `json:"root"`
	Parent      *string           `json:"parent"`
	MaxModelLen *int              `json:"max_model_len"`
	Permission  []modelPermission `json:"permission"`
}

func newCard(id, root string, parent *string, maxLen *int) modelCard {
	now := time.Now().Unix()
	return modelCard{ID: id, Object: "model", Created: now, OwnedBy: "vllm", Root: &root, Parent: parent,
		MaxModelLen: maxLen, Permission: []modelPermission{{ID: "modelperm-" + uuid.NewString(),
			Object: "model_permission", Created: now, AllowSampling: true, AllowLogprobs: true, AllowView: true,
			Organization: "*"}}}
}

func (e *Engine) handleModels(w http.ResponseWriter, _ *http.Request) {
	base := e.opts.ServedModelName
	cards := []modelCard{newCard(base, e.opts.ModelDir, nil, &e.maxModelLen)}
	for _, a := range e.adapters.list() {
		cards = append(cards, newCard(a.name, a.path, &base, nil))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": cards})
}

type loraRequest struct {
	LoraName    string `json:"lora_name"`
	LoraPath    string `json:"lora_path"`
	LoadInplace bool   `json:"load_inplace"`
}

func invalidInput(code int, format string, args ...any) *apiError {
	return &apiError{Message: fmt.Sprintf(format, args...), Type: "InvalidUserInput", Code: code}
}

func (e *Engine) handleLoadLoRA(w http.ResponseWriter, r *http.Request) {
	var req loraRequest
	if apiErr := decodeBody(r, &req); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if apiErr := e.loadLoRA(req); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", req.LoraName))
}

// loadLoRA loads an adapter under a name, as vLLM's load_lora_adapter does.
func (e *Engine) loadLoRA(req loraRequest) *apiError {
	if req.LoraName == "" || req.LoraPath == "" {
		return invalidInput(http.StatusBadRequest, "Both 'lora_name' and 'lora_path' must be provided.")
	}
	if req.LoraName == e.opts.ServedModelName {
		return invalidInput(http.StatusBadRequest, "The lora adapter name '%s' is the base model's name.", req.LoraName)
	}
	if !req.LoadInplace && e.adapters.has(req.LoraName) {
		return invalidInput(http.StatusBadRequest, "The lora adapter '%s' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.", req.LoraName)
	}
	if _, err := os.Stat(req.LoraPath); errors.Is(err, fs.ErrNotExist) {
		return notFound("", "Loading lora %s failed: No adapter found for %s", req.LoraName, req.LoraPath)
	}
	a, err := e.model().LoadAdapter(req.LoraPath)
	// As vLLM: a folder that is not a loadable adapter is the client's error
	// (404 without an adapter in it, else 400), never a 500.
	if errors.Is(err, fs.ErrNotExist) {
		return notFound("", "Loading lora %s failed: No adapter found for %s (%v)", req.LoraName, req.LoraPath, err)
	}
	if err != nil {
		return badRequest("", "Loading lora %s failed: %v", req.LoraName, err)
	}
	entry := &adapterEntry{name: req.LoraName, path: req.LoraPath, lm: a}
	if req.LoadInplace {
		e.adapters.remove(req.LoraName)
	}
	if err := e.adapters.add(entry); err != nil {
		a.Free()
		return invalidInput(http.StatusBadRequest, "%v", err)
	}
	return nil
}

func (e *Engine) handleUnloadLoRA(w http.ResponseWriter, r *http.Request) {
	var req loraRequest
	if apiErr := decodeBody(r, &req); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if req.LoraName == "" {
		writeError(w, invalidInput(http.StatusBadRequest, "'lora_name' needs to be provided to unload a LoRA adapter."))
		return
	}
	if !e.adapters.remove(req.LoraName) {
		writeError(w, notFound("", "The lora adapter '%s' cannot be found.", req.LoraName))
		return
	}
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", req.LoraName))
}

func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(s))
}

// handleSleep puts the engine to sleep: new generation requests get 503
// until every part is woken; requests already running finish. Like vLLM's
// sleep it drops the KV cache (the prefix cache); the CPU backend keeps the
// weights resident, so levels 1 and 2 behave alike.
func (e *Engine) handleSleep(w http.ResponseWriter, r *http.Request) {
	if s := r.URL.Query().Get("level"); s != "" {
		if n, err := strconv.Atoi(s); err != nil || n < 1 || n > 2 {
			writeError(w, badRequest("level", "level must be 1 or 2, got %q.", s))
			return
		}
	}
	e.sleep.set(sleepTags, true)
	e.sched.dropPrefixes()
	w.WriteHeader(http.StatusOK)
}

// handleWakeUp wakes the parts named by ?tags= (weights, kv_cache), or all.
func (e *Engine) handleWakeUp(w http.ResponseWriter, r *http.Request) {
	tags := r.URL.Query()["tags"]
	for _, t := range tags {
		if t != "weights" && t != "kv_cache" {
			writeError(w, badRequest("tags", "unknown wake_up tag %q (have weights, kv_cache).", t))
			return
		}
	}
	if len(tags) == 0 {
		tags = sleepTags
	}
	e.sleep.set(tags, false)
	w.WriteHeader(http.StatusOK)
}

// sleepTags are the parts of an engine that sleep and wake separately.
var sleepTags = []string{"weights", "kv_cache"}

// sleepState tracks which parts sleep.
type sleepState struct {
	mu     sync.Mutex
	asleep map[string]bool
}

func (s *sleepState) set(tags []string, asleep bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.asleep == nil {
		s.asleep = map[string]bool{}
	}
	for _, t := range tags {
		s.asleep[t] = asleep
	}
}

func (s *sleepState) sleeping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.asleep {
		if v {
			return true
		}
	}
	return false
}

// handleCollectiveRPC serves vLLM's dev-mode /collective_rpc for the one
// method hone's trainer calls: reload_weights, which re-reads the model
// folder (written in place by full fine-tuning).
func (e *Engine) handleCollectiveRPC(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Method string `json:"method"`
	}
	if apiErr := decodeBody(r, &req); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if req.Method != "reload_weights" {
		writeError(w, badRequest("method", "collective_rpc method %q is not supported (have reload_weights).", req.Method))
		return
	}
	if err := e.reloadWeights(r.Context()); err != nil {
		writeError(w, serverError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": []any{nil}})
}
