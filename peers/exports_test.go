package peers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
)

// exportSummary is what scripts/peers/read_export.py reports.
type exportSummary struct {
	Rows          int               `json:"rows"`
	Steps         int               `json:"steps"`
	Rendered      int               `json:"rendered"`
	Schema        map[string]string `json:"schema"`
	PandasJSONL   map[string]string `json:"pandas_jsonl"`
	PandasParquet map[string]string `json:"pandas_parquet"`
}

// TestExportsReadByConsumers exports a session the openai client made
// through hone in front of vLLM (chat, stream, a tool call and its result)
// as `hone export` does, in Parquet and JSONL, and has their consumers read
// them: pyarrow checks the Parquet column types against what verl's RL
// datasets take (prompt: a list of {role, content} messages; token columns
// lists of integers; rewards a float); each step row's prompt and tools,
// rendered by transformers' apply_chat_template with Qwen3's tokenizer and
// template, must give exactly the prompt ids hone recorded from vLLM; pandas
// reads the JSONL and the Parquet to the same rows.
func TestExportsReadByConsumers(t *testing.T) {
	v := needVLLM(t)
	py := needPython(t)
	tokDir := needTokenizer(t)
	h := startHoneStack(t, v.URL, nil)
	const session = "export-1"
	var client openaiClientResult
	runPeerScript(t, py, "openai_client.py", 5*time.Minute, &client,
		"--base-url", h.data+"/v1", "--model", v.Model, "--session", session, "--task", "export-task", "--reward", "0.5", "--tokenizer", tokDir)
	h.experiences(t, func(all []capture.Experience) bool {
		return len(stepCalls(ofSession(all, session))) == len(client.Calls)
	})

	dir := t.TempDir()
	paths := map[string]string{"parquet": filepath.Join(dir, "rows.parquet"), "jsonl": filepath.Join(dir, "rows.jsonl")}
	var rows []capture.Row
	for format, path := range paths {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w, err := capture.NewRowWriter(f, format)
		if err != nil {
			t.Fatal(err)
		}
		rows = rows[:0]
		err = h.store.Export(context.Background(), capture.ExportFilter{Trajectories: true, Steps: true}, func(r *capture.Row) error {
			rows = append(rows, *r)
			return w.Write(r)
		})
		if err == nil {
			err = w.Close()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("export %s: %v", format, err)
		}
	}
	steps := 0
	for _, r := range rows {
		if r.Kind == capture.KindStep {
			steps++
		}
	}
	if steps != len(client.Calls) {
		t.Fatalf("%d step rows, want one per call (%d)", steps, len(client.Calls))
	}

	var sum exportSummary
	runPeerScript(t, py, "read_export.py", 5*time.Minute, &sum,
		"--parquet", paths["parquet"], "--jsonl", paths["jsonl"], "--tokenizer", tokDir)
	if sum.Rows != len(rows) || sum.Steps != steps || sum.Rendered != steps {
		t.Errorf("read %d rows (%d steps, %d re-rendered to hone's prompt ids); exported %d rows, %d steps", sum.Rows, sum.Steps, sum.Rendered, len(rows), steps)
	}
	for col, want := range map[string]string{
		"prompt":        "list<element: struct<role: string not null, content: string not null",
		"input_ids":     "list<element: int32",
		"old_log_probs": "list<element: float",
		"rewards":       "double",
		"created":       "timestamp[ms, tz=UTC]",
	} {
		if got := sum.Schema[col]; !strings.HasPrefix(got, want) {
			t.Errorf("parquet column %s: %s, want %s...", col, got, want)
		}
	}
	for col, want := range map[string]string{"rewards": "float64", "has_reward": "bool", "prompt": "object", "input_ids": "object"} {
		if sum.PandasJSONL[col] != want || sum.PandasParquet[col] != want {
			t.Errorf("pandas %s: jsonl %s, parquet %s, want %s", col, sum.PandasJSONL[col], sum.PandasParquet[col], want)
		}
	}
	t.Logf("%d rows (%d steps) read by pyarrow and pandas; parquet prompt: %s", sum.Rows, sum.Steps, sum.Schema["prompt"])
}
