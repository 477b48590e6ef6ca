package starter

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/workflows"
)

// ErrSearchAttributesUnknown is what a *SearchAttributesError matches with
// errors.Is.
var ErrSearchAttributesUnknown = errors.New("the Temporal namespace does not know shipnotify's search attributes")

// SearchAttributesError is a start, or a check, that the server refused
// because the namespace has no mapping for one of shipnotify's search
// attributes: `shipnotify setup` was never run on it, or ran moments ago
// and the server has not taken the attributes in yet.
type SearchAttributesError struct {
	// Namespace is the Temporal namespace, Attribute the one the server named.
	Namespace, Attribute string
	// Err is the server's error.
	Err error
}

func (e *SearchAttributesError) Error() string {
	return fmt.Sprintf("the Temporal namespace %q does not know shipnotify's search attribute %s yet: "+
		"run `shipnotify setup` (it waits until the server accepts them)", e.Namespace, e.Attribute)
}

// Is makes errors.Is(err, ErrSearchAttributesUnknown) true.
func (e *SearchAttributesError) Is(target error) bool { return target == ErrSearchAttributesUnknown }

func (e *SearchAttributesError) Unwrap() error { return e.Err }

// unknownAttributeMessages are the server's words (v1.29) for an attribute
// the namespace does not know; each names it in its group.
var unknownAttributeMessages = []*regexp.Regexp{
	// A start's, in the frontend, from the namespace's alias map (SQL
	// visibility; the map is cached and refreshed every few seconds).
	regexp.MustCompile(`has no mapping defined for search attribute (\w+)`),
	// A start's, from the cluster's attribute types (Elasticsearch).
	regexp.MustCompile(`search attribute (\w+) is not defined`),
	// A visibility query's.
	regexp.MustCompile(`column name '(\w+)' is not a valid search attribute`),
}

// unknownAttribute is the shipnotify search attribute err says the namespace
// has no mapping for. Only an InvalidArgument naming one of ours counts: the
// server says nothing else that way, and anything else is another failure.
func unknownAttribute(err error) (string, bool) {
	var invalid *serviceerror.InvalidArgument
	if !errors.As(err, &invalid) {
		return "", false
	}
	for _, re := range unknownAttributeMessages {
		if m := re.FindStringSubmatch(invalid.Error()); m != nil {
			if _, ours := workflows.SearchAttributeTypes[m[1]]; ours {
				return m[1], true
			}
		}
	}
	return "", false
}

// asSearchAttributesError is err as a *SearchAttributesError when it is
// the server's "no mapping" refusal, nil otherwise.
func asSearchAttributesError(err error, namespace string) error {
	if attr, ok := unknownAttribute(err); ok {
		return &SearchAttributesError{Namespace: namespace, Attribute: attr, Err: err}
	}
	return nil
}

func (s *Starter) namespace() string {
	if s.Namespace != "" {
		return s.Namespace
	}
	return client.DefaultNamespace
}

// probeValue is the value a probe or check gives each attribute.
const probeValue = "shipnotify-setup-probe"

// CheckSearchAttributes is a *SearchAttributesError when the namespace does
// not know shipnotify's search attributes, nil when it does. It writes
// nothing: a visibility count naming every attribute, matching no workflow
// (a workflow id no reminder has). A caller checks before it writes, so a
// namespace never set up gets the error and no mirror row; it is not proof
// that a start will be accepted (ProbeSearchAttributes is), so a start's
// own refusal is still told the same way.
func (s *Starter) CheckSearchAttributes(ctx context.Context) error {
	terms := []string{fmt.Sprintf("WorkflowId = '%s'", probeValue)}
	for _, name := range searchAttributeNames() {
		switch workflows.SearchAttributeTypes[name] {
		case enums.INDEXED_VALUE_TYPE_DATETIME:
			terms = append(terms, fmt.Sprintf("%s = '%s'", name, time.Unix(0, 0).UTC().Format(time.RFC3339)))
		default:
			terms = append(terms, fmt.Sprintf("%s = '%s'", name, probeValue))
		}
	}
	_, err := s.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: s.namespace(), Query: strings.Join(terms, " AND "),
	})
	if err != nil {
		if saErr := asSearchAttributesError(err, s.namespace()); saErr != nil {
			return saErr
		}
		return fmt.Errorf("error checking the namespace's search attributes: %w", err)
	}
	return nil
}

// ProbeTaskQueue is the task queue of setup's probe workflows: no worker
// polls it, so a probe never runs a task.
const ProbeTaskQueue = "shipnotify-setup-probe"

// ProbeWorkflowType is the probe's workflow type, which no worker registers.
const ProbeWorkflowType = "ShipnotifySetupProbe"

// ProbeSearchAttributes starts a workflow carrying every shipnotify search
// attribute and terminates it at once: nil when the server accepted it, a
// *SearchAttributesError when the namespace has no mapping for one yet.
//
// A start, not a cheaper visibility count (CheckSearchAttributes), because
// a start is what failed after setup (issue 23) and a count is answered by
// another path: the query converter, not the start's validation, which on
// Elasticsearch also reads the cluster's attribute types from a cache of
// its own. The probe sends no payload, names a type no worker registers on
// a queue no worker polls, and times out by itself if the terminate is lost.
func ProbeSearchAttributes(ctx context.Context, c client.Client, namespace, id string) error {
	var sas []temporal.SearchAttributeUpdate
	for _, name := range searchAttributeNames() {
		switch typ := workflows.SearchAttributeTypes[name]; typ {
		case enums.INDEXED_VALUE_TYPE_KEYWORD:
			sas = append(sas, temporal.NewSearchAttributeKeyKeyword(name).ValueSet(probeValue))
		case enums.INDEXED_VALUE_TYPE_DATETIME:
			sas = append(sas, temporal.NewSearchAttributeKeyTime(name).ValueSet(time.Now()))
		default:
			return fmt.Errorf("error probing search attribute %s: no probe value for type %s", name, typ)
		}
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                ProbeTaskQueue,
		WorkflowExecutionTimeout: time.Minute,
		TypedSearchAttributes:    temporal.NewSearchAttributes(sas...),
	}, ProbeWorkflowType)
	if err != nil {
		if saErr := asSearchAttributesError(err, namespace); saErr != nil {
			return saErr
		}
		return fmt.Errorf("error starting the probe workflow: %w", err)
	}
	if err := c.TerminateWorkflow(ctx, id, run.GetRunID(), "shipnotify setup's probe: its start was the test"); err != nil {
		return fmt.Errorf("error terminating the probe workflow %s: %w", id, err)
	}
	return nil
}

// searchAttributeNames are workflows.SearchAttributeTypes' names, sorted.
func searchAttributeNames() []string {
	names := make([]string, 0, len(workflows.SearchAttributeTypes))
	for n := range workflows.SearchAttributeTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
