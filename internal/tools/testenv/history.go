package testenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/shipnotify/shipnotify/workflows"
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
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "workflows", "testdata", "histories")
}

// AtCurrentLevel names the recorded history of a path as a reminder
// started at the current level takes it, so raising the level records new
// files beside the old level's.
func AtCurrentLevel(path string) string {
	return fmt.Sprintf("%s-at-level-%d", path, workflows.CurrentLevel)
}

// RecordHistory saves a finished workflow's history as name.json for the
// replay test, when SHIPNOTIFY_RECORD_HISTORIES=1; otherwise it does nothing.
// Recorded histories are append-only: they stand for reminders already
// running in production, which today's code must still replay. A history
// that exists is never rewritten: RecordHistory logs that it kept it and
// returns, so the tests pass with recording on. Record a changed path under
// a new name.
func RecordHistory(t testing.TB, c client.Client, workflowID, name string) {
	t.Helper()
	if os.Getenv("SHIPNOTIFY_RECORD_HISTORIES") != "1" {
		return
	}
	path := filepath.Join(HistoriesDir(), name+".json")
	if _, err := os.Stat(path); err == nil {
		t.Logf("history %s exists and is kept: recorded histories are append-only", path)
		return
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(History(t, c, workflowID))
	if err != nil {
		t.Fatal(err)
	}
	created, err := createNew(path, b)
	if err != nil {
		t.Fatal(err)
	}
	if !created {
		t.Logf("history %s exists and is kept: recorded histories are append-only", path)
	}
}

// createNew writes b to a new file at path; if the file exists it leaves it
// alone and reports false. O_EXCL makes the check and the creation one step.
func createNew(path string, b []byte) (bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("error creating history file: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return false, fmt.Errorf("error writing history file: %w", err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("error writing history file: %w", err)
	}
	return true, nil
}

// HistoryText is every string and byte field of a history, raw and
// concatenated (payload data as stored, not base64), for searching it.
func HistoryText(h *historypb.History) string {
	var b strings.Builder
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsMap():
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					b.WriteString(k.String())
					b.WriteByte('\n')
					if fd.MapValue().Kind() == protoreflect.MessageKind {
						walk(mv.Message())
					} else {
						writeScalar(&b, fd.MapValue().Kind(), mv)
					}
					return true
				})
			case fd.IsList():
				l := v.List()
				for i := 0; i < l.Len(); i++ {
					if fd.Kind() == protoreflect.MessageKind {
						walk(l.Get(i).Message())
					} else {
						writeScalar(&b, fd.Kind(), l.Get(i))
					}
				}
			case fd.Kind() == protoreflect.MessageKind:
				walk(v.Message())
			default:
				writeScalar(&b, fd.Kind(), v)
			}
			return true
		})
	}
	walk(h.ProtoReflect())
	return b.String()
}

func writeScalar(b *strings.Builder, k protoreflect.Kind, v protoreflect.Value) {
	switch k {
	case protoreflect.StringKind:
		b.WriteString(v.String())
	case protoreflect.BytesKind:
		b.Write(v.Bytes())
	default:
		return
	}
	b.WriteByte('\n')
}
