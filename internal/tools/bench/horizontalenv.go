package bench

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/balancer"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/webhook"
)

// horizontalEnv is the system the workload runs: the stand-ins in this
// process and the product's processes.
type horizontalEnv struct {
	o        HorizontalOptions
	mail     *sink.MailSink
	accepted atomic.Int64
	tracker  *sink.WebhookSink
	lb       *http.Server
	// apiURL is the balancer's: the serve replicas' API, as a tracker
	// reaches it.
	apiURL  string
	serves  procSet
	fleet   *workerFleet
	dir     string
	sampler *cpuSampler
	// ids seal the outbox's event ids as the replicas post them.
	ids *opaque.Keys
}

// startHorizontal starts the stand-ins and the product's processes: the
// mail sink posting SendGrid's signed events to the serve replicas through
// the balancer, the tracker's receiver the replicas post status events to,
// the replicas, and the largest worker count's processes (none running).
func startHorizontal(o HorizontalOptions) (*horizontalEnv, error) {
	_, apiKey, err := api.NewKey("bench-horizontal", []api.Scope{api.ScopeRead})
	if err != nil {
		return nil, err
	}
	h, err := startProduct(productOptions{Bin: o.Bin, Env: o.Env, Serves: o.Serves, Workers: slices.Max(o.Workers),
		KeyLines: []string{apiKey.Line()}})
	if err != nil {
		return nil, err
	}
	h.o = o
	return h, nil
}

// productOptions are what startProduct starts: Serves replicas and
// Workers worker processes (none running) of Bin, in Env, serve taking
// the API keys of KeyLines (configuration lines).
type productOptions struct {
	Bin      string
	Env      []string
	Serves   int
	Workers  int
	KeyLines []string
}

// startProduct starts the stand-ins and the serve replicas, and makes
// (without starting) the worker processes: the horizontal and the
// fairness workloads run the same system.
func startProduct(o productOptions) (_ *horizontalEnv, err error) {
	h := &horizontalEnv{}
	if h.ids, err = testenv.IDKeys(o.Env); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	const mailKey = "SG.bench-horizontal"
	if h.mail, err = sink.StartMail("", mailKey); err != nil {
		return nil, err
	}
	// Counted here, not by reading the journal: a kill waits on it, and
	// the journal holds every run's mail.
	h.mail.OnMail = func(sink.Mail) { h.accepted.Add(1) }
	secret := webhook.NewSecret()
	if h.tracker, err = sink.StartWebhook("", secret); err != nil {
		return nil, err
	}
	if h.dir, err = os.MkdirTemp("", "shipnotify-horizontal-"); err != nil {
		return nil, fmt.Errorf("error making the benchmark's folder: %w", err)
	}
	endpoints := filepath.Join(h.dir, "status-endpoints")
	line := fmt.Sprintf("%s %s/hooks/shipnotify %s\n", horizontalEndpoint, h.tracker.URL(), secret)
	if err := os.WriteFile(endpoints, []byte(line), 0o600); err != nil {
		return nil, fmt.Errorf("error writing the status endpoints file: %w", err)
	}
	eventKey, err := sink.NewEventKey()
	if err != nil {
		return nil, err
	}
	env := append(slices.Clone(o.Env),
		"SENDGRID_API_KEY="+mailKey, "SENDGRID_BASE_URL="+h.mail.URL(),
		"SHIPNOTIFY_WEBHOOK_ALLOW_LOOPBACK=true",
		"SHIPNOTIFY_SENDGRID_EVENT_KEY="+eventKey.PublicKey(),
		"SHIPNOTIFY_STATUS_ENDPOINTS_FILE="+endpoints,
		"SHIPNOTIFY_API_KEYS="+strings.Join(o.KeyLines, ";"))
	var urls []string
	for i := range o.Serves {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		ops, err := freeAddr()
		if err != nil {
			return nil, err
		}
		urls = append(urls, "http://"+addr)
		h.serves = append(h.serves, newProductProc(fmt.Sprintf("serve %d", i), o.Bin, "serve", serveReadyMsg,
			append(slices.Clone(env), "SHIPNOTIFY_API_ADDR="+addr, "SHIPNOTIFY_METRICS_ADDR="+ops)))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("error listening for the balancer: %w", err)
	}
	h.apiURL = "http://" + ln.Addr().String()
	h.lb = &http.Server{Handler: balancer.New(urls), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.lb.Serve(ln) }()
	h.mail.EmitEvents(sink.EventOptions{URL: h.apiURL + sendgridevents.Path, Key: eventKey,
		FlushEvery: 200 * time.Millisecond})
	if _, err := h.serves.startAll(); err != nil {
		return nil, err
	}
	h.fleet = &workerFleet{}
	for i := range o.Workers {
		h.fleet.all = append(h.fleet.all, newProductProc(fmt.Sprintf("worker %d", i), o.Bin, "worker", workerReadyMsg,
			append(slices.Clone(env), "SHIPNOTIFY_METRICS_ADDR=127.0.0.1:0")))
	}
	return h, nil
}

// horizontalEndpoint names the tracker's endpoint in the status endpoints
// file.
const horizontalEndpoint = "tracker"

// freeAddr is a loopback address nothing listens on right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("error finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (h *horizontalEnv) close() {
	if h.fleet != nil {
		_ = h.fleet.all.stopAll()
		h.fleet.all.killAll()
	}
	_ = h.serves.stopAll()
	h.serves.killAll()
	if h.lb != nil {
		_ = h.lb.Close()
	}
	if h.mail != nil {
		_ = h.mail.Close()
	}
	if h.tracker != nil {
		_ = h.tracker.Close()
	}
	if h.dir != "" {
		_ = os.RemoveAll(h.dir)
	}
}

func (h *horizontalEnv) logf(format string, args ...any) {
	if h.o.Progress != nil {
		fmt.Fprintf(h.o.Progress, "horizontal: "+format+"\n", args...)
	}
}
