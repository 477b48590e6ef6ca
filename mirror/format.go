package mirror

import (
	"bytes"
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
// Both carry the same columns (exportColumns), in the same order: a JSON
// line has every key, null where CSV's cell is empty.
func NewRowWriter(w io.Writer, format string) (RowWriter, error) {
	switch format {
	case FormatJSONL:
		return jsonlRowWriter(w), nil
	case FormatCSV:
		return csvRowWriter(w), nil
	}
	return RowWriter{}, ErrUnknownFormat
}

// exportColumns are an export's columns, each with its value in a row (a
// string, or a *time.Time that is nil when there is none). Columns are
// added at the end, so a reader of an older export or prune archive by
// position still finds its columns where they were.
var exportColumns = []struct {
	name  string
	value func(Row) any
}{
	{"reminder_id", func(r Row) any { return r.ID }},
	{"shipment_id", func(r Row) any { return r.ShipmentID }},
	{"update_id", func(r Row) any { return r.UpdateID }},
	{"subscriber_id", func(r Row) any { return r.SubscriberID }},
	{"channel", func(r Row) any { return string(r.Channel) }},
	{"due_at", func(r Row) any { return &r.DueAt }},
	{"state", func(r Row) any { return string(r.State) }},
	{"delivery_key", func(r Row) any { return r.DeliveryKey }},
	{"workflow_id", func(r Row) any { return r.WorkflowID }},
	{"sent_at", func(r Row) any { return r.SentAt }},
	{"created_at", func(r Row) any { return &r.CreatedAt }},
	{"updated_at", func(r Row) any { return &r.UpdatedAt }},
	{"provider_outcome", func(r Row) any { return string(r.ProviderOutcome) }},
	{"provider_outcome_at", func(r Row) any { return r.ProviderOutcomeAt }},
	{"delivered_at", func(r Row) any { return r.DeliveredAt }},
	// "" is the default tenant.
	{"tenant", func(r Row) any { return r.Tenant }},
	{"requested_due_at", func(r Row) any { return &r.RequestedDueAt }},
	{"workflow_started_at", func(r Row) any { return r.WorkflowStartedAt }},
	{"cancel_requested_at", func(r Row) any { return r.CancelRequestedAt }},
	// When it goes out: due_at, or its send window's opening.
	{"goes_out_at", func(r Row) any { return &r.GoesOutAt }},
	// The send window as people read it ("" none).
	{"send_window", func(r Row) any {
		if r.Window == nil {
			return ""
		}
		return r.Window.String()
	}},
}

// ExportColumns is the columns' names, as CSV's header and each JSON
// line's keys give them.
func ExportColumns() []string {
	names := make([]string, len(exportColumns))
	for i, c := range exportColumns {
		names[i] = c.name
	}
	return names
}

// exportTime is a time as an export states it: UTC, RFC 3339 with Z.
func exportTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func jsonlRowWriter(w io.Writer) RowWriter {
	var buf bytes.Buffer
	return RowWriter{
		Write: func(r Row) error {
			buf.Reset()
			buf.WriteByte('{')
			for i, c := range exportColumns {
				if i > 0 {
					buf.WriteByte(',')
				}
				name, _ := json.Marshal(c.name)
				buf.Write(name)
				buf.WriteByte(':')
				v := c.value(r)
				if t, ok := v.(*time.Time); ok {
					if t == nil {
						v = nil
					} else {
						v = exportTime(*t)
					}
				}
				b, err := json.Marshal(v)
				if err != nil {
					return err
				}
				buf.Write(b)
			}
			buf.WriteString("}\n")
			_, err := w.Write(buf.Bytes())
			return err
		},
		Flush: func() error { return nil },
	}
}

func csvRowWriter(w io.Writer) RowWriter {
	cw := csv.NewWriter(w)
	wroteHeader := false
	record := make([]string, len(exportColumns))
	return RowWriter{
		Write: func(r Row) error {
			if !wroteHeader {
				wroteHeader = true
				if err := cw.Write(ExportColumns()); err != nil {
					return err
				}
			}
			for i, c := range exportColumns {
				switch v := c.value(r).(type) {
				case string:
					record[i] = v
				case *time.Time:
					record[i] = csvTime(v)
				}
			}
			return cw.Write(record)
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
	return exportTime(*t)
}
