package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/codec"
)

func init() {
	register("codec-server", "serve /encode and /decode so the Temporal Web UI and CLI can read encrypted payloads", runCodecServer)
	register("codec-keygen", "print a new payload encryption key (id:base64) for SHIPNOTIFY_CODEC_KEYS", runCodecKeygen)
}

func runCodecServer(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "codec-server", "codec-server [--listen ADDR] [--origin URL]")
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve on")
	origins := fs.String("origin", "http://localhost:8233", "comma-separated browser origins allowed to call it (the Web UI's)")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	d, err := newDeps(e)
	if err != nil {
		return err
	}
	if d.cfg.Codec == nil {
		return usageError{codecKeysMissing()}
	}
	srv := d.cfg.Codec.Server(*listen, codec.ServerOptions{
		Origins: strings.Split(*origins, ","), Token: d.cfg.CodecServerToken,
	})
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	d.logger.Info("codec server listening", "address", *listen, "origins", *origins, "token", d.cfg.CodecServerToken != "")
	select {
	case err := <-errc:
		return fmt.Errorf("codec server: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func codecKeysMissing() error {
	return errors.New("SHIPNOTIFY_CODEC_KEYS or SHIPNOTIFY_CODEC_KEYS_FILE: the codec server needs the payload keys")
}

func runCodecKeygen(_ context.Context, e env, args []string) error {
	fs := newFlags(e, "codec-keygen", "codec-keygen [--id ID]")
	id := fs.String("id", "k"+time.Now().UTC().Format("20060102"), "the key's id, stored in every payload it seals")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, codec.NewKey(*id))
	return nil
}
