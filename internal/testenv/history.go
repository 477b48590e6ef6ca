package testenv

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
)

// History fetches a workflow's full history from the server.
func History(t testing.TB, c client.Client, workflowID string) *historypb.History {
	t.Helper()
	iter := c.GetWorkflowHistory(context.Background(), workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatalf("reading history of %s: %v", workflowID, err)
		}
		h.Events = append(h.Events, ev)
	}
	return h
}

// HistoriesDir is where recorded histories live; the replay test reads them.
func HistoriesDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "workflows", "testdata", "histories")
}

// RecordHistory saves a finished workflow's history as name.json for the
// replay test, when SHIPNOTIFY_RECORD_HISTORIES=1 (after an intended change
// to workflow code); otherwise it does nothing.
func RecordHistory(t testing.TB, c client.Client, workflowID, name string) {
	t.Helper()
	if os.Getenv("SHIPNOTIFY_RECORD_HISTORIES") != "1" {
		return
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(History(t, c, workflowID))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(HistoriesDir(), name+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
