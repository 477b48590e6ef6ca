package faults

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/webhook"
	"github.com/shipnotify/shipnotify/worker"
	"github.com/shipnotify/shipnotify/workflows"
)

// fastPathWorkerEnv, set to 1, makes this test binary a worker of the
// releases that ran the notify's first attempt as a local activity
// (changeLocalFirstAttempt at version 1), so a test can SIGKILL one in its
// local attempt and hand its reminders to today's worker, as a deploy does.
const fastPathWorkerEnv = "SHIPNOTIFY_FAULTS_FAST_PATH_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(fastPathWorkerEnv) == "1" {
		if err := runFastPathWorker(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runFastPathWorker runs a worker, configured by a stack's Env, that
// records version 1 of changeLocalFirstAttempt for new reminders, until it
// is killed.
func runFastPathWorker() error {
	keys, err := codec.ParseKeys(strings.NewReader(os.Getenv("SHIPNOTIFY_CODEC_KEYS")))
	if err != nil {
		return err
	}
	cdc, err := codec.New(keys, codec.Options{})
	if err != nil {
		return err
	}
	c, err := client.Dial(client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS"), Namespace: "default",
		DataConverter: cdc.DataConverter(), FailureConverter: cdc.FailureConverter()})
	if err != nil {
		return err
	}
	defer c.Close()
	pool, err := pgxpool.New(context.Background(), os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	wait, err := time.ParseDuration(os.Getenv("SHIPNOTIFY_UNCONFIRMED_SEND_WAIT"))
	if err != nil {
		return err
	}
	acts := &activities.Activities{
		Mirror: mirror.New(pool).SealSecretsWith(cdc),
		Email: email.NewSender(email.Options{APIKey: os.Getenv("SENDGRID_API_KEY"), BaseURL: os.Getenv("SENDGRID_BASE_URL"),
			FromEmail: "reminders@shipnotify.example"}),
		Webhook:      webhook.NewSender(webhook.Options{Guard: webhook.Guard{AllowLoopback: true}}),
		EvidenceWait: wait,
	}
	w := worker.New(c, os.Getenv("SHIPNOTIFY_TASK_QUEUE"), acts,
		worker.Options{Versions: map[string]workflow.Version{workflows.ChangeLocalFirstAttempt: 1}})
	fmt.Println("fast-path worker polling")
	return w.Run(sdkworker.InterruptCh())
}
