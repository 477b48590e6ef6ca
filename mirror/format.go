package mirror

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"time"
)

// ErrUnknownFormat is returned for an export format other than jsonl or csv.
var ErrUnknownFormat = errors.New("want jsonl or csv")

// Export formats: `shipnotify export` writes them, prune archives in them.
const (
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
)

// RowWriter writes rows in one export format, one at a time, so an export
// of any size holds one row in memory. Flush ends the output.
type RowWriter struct {
	Write func(Row) error
	Flush func() error
}

// NewRowWriter returns a writer of format (FormatJSONL or FormatCSV) to w.
func NewRowWriter(w io.Writer, format string) (RowWriter, error) {
	switch format {
	case FormatJSONL:
		enc := json.NewEncoder(w)
		return RowWriter{Write: func(r Row) error { return enc.Encode(r) }, Flush: func() error { return nil }}, nil
	case FormatCSV:
		return csvRowWriter(w), nil
	}
	return RowWriter{}, ErrUnknownFormat
}

// csvHeader: columns are added at the end, so a reader of an older export
// or prune archive by position still finds its columns where they were.
var csvHeader = []string{"reminder_id", "shipment_id", "update_id", "subscriber_id", "channel", "due_at", "state",
	"delivery_key", "workflow_id", "sent_at", "created_at", "updated_at",
	"provider_outcome", "provider_outcome_at", "delivered_at", "tenant"}

func csvRowWriter(w io.Writer) RowWriter {
	cw := csv.NewWriter(w)
	wroteHeader := false
	return RowWriter{
		Write: func(r Row) error {
			if !wroteHeader {
				wroteHeader = true
				if err := cw.Write(csvHeader); err != nil {
					return err
				}
			}
			return cw.Write([]string{r.ID, r.ShipmentID, r.UpdateID, r.SubscriberID, string(r.Channel),
				r.DueAt.UTC().Format(time.RFC3339Nano), string(r.State), r.DeliveryKey, r.WorkflowID, csvTime(r.SentAt),
				r.CreatedAt.UTC().Format(time.RFC3339Nano), r.UpdatedAt.UTC().Format(time.RFC3339Nano),
				string(r.ProviderOutcome), csvTime(r.ProviderOutcomeAt), csvTime(r.DeliveredAt), r.Tenant})
		},
		Flush: func() error {
			cw.Flush()
			return cw.Error()
		},
	}
}

// csvTime is an optional time as CSV holds it: empty when there is none.
func csvTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
