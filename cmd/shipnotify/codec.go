package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/internal/cli"
)

func init() {
	register("codec-server", "serve /encode and /decode so the Temporal Web UI and CLI can read encrypted payloads", runCodecServer)
	register("codec-keygen", "print a new payload encryption key (id:base64) for SHIPNOTIFY_CODEC_KEYS", runCodecKeygen)
}

func runCodecServer(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "codec-server", "codec-server [--listen ADDR] [--origin URL] [--allowed-hosts NAMES] [--insecure-loopback]")
	// The dev environment's (scripts/dev.sh env) are the defaults, so the
	// Web UI it started reaches this server and is let in.
	listen := fs.String("listen", devDefault(e, "SHIPNOTIFY_DEV_CODEC_ADDR", "127.0.0.1:8081"),
		"address to serve on; beyond loopback it requires SHIPNOTIFY_CODEC_SERVER_TOKEN (default SHIPNOTIFY_DEV_CODEC_ADDR when set)")
	origins := fs.String("origin", devDefault(e, "SHIPNOTIFY_DEV_UI_URL", "http://localhost:8233"),
		"comma-separated browser origins allowed to call it (the Web UI's; default SHIPNOTIFY_DEV_UI_URL when set)")
	hosts := fs.String("allowed-hosts", "", "comma-separated names it is reached by (the Host header), besides loopback names and the --listen host")
	insecure := fs.Bool("insecure-loopback", false, "serve loopback without SHIPNOTIFY_CODEC_SERVER_TOKEN, for development: any local process may then decrypt and encrypt payloads")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	if d.Cfg.Codec == nil {
		return cli.UsageError{Err: codecKeysMissing()}
	}
	srv, err := d.Cfg.Codec.Server(*listen, codec.ServerOptions{
		Origins: splitList(*origins), Token: d.Cfg.CodecServerToken, Hosts: splitList(*hosts), InsecureLoopback: *insecure,
	})
	switch {
	case errors.Is(err, codec.ErrTokenRequired):
		return cli.Usagef("SHIPNOTIFY_CODEC_SERVER_TOKEN: required to listen on --listen %s (anyone who reaches the codec "+
			"server can decrypt histories and encrypt payloads); set a token, or, for development on loopback only, "+
			"pass --insecure-loopback", *listen)
	case err != nil:
		return cli.Usagef("--listen: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	d.Logger.Info("codec server listening", "address", *listen, "origins", *origins, "allowed_hosts", *hosts,
		"token", d.Cfg.CodecServerToken != "")
	select {
	case err := <-errc:
		return fmt.Errorf("error serving the codec server: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("error stopping the codec server: %w", err)
	}
	return nil
}

// devDefault is the dev environment's variable key (scripts/dev.sh env),
// or fallback when it is unset or empty.
func devDefault(e cli.Env, key, fallback string) string {
	if v, ok := e.Lookup(key); ok && v != "" {
		return v
	}
	return fallback
}

// splitList splits a comma-separated flag, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func codecKeysMissing() error {
	return errors.New("SHIPNOTIFY_CODEC_KEYS or SHIPNOTIFY_CODEC_KEYS_FILE: the codec server needs the payload keys")
}

func runCodecKeygen(_ context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "codec-keygen", "codec-keygen [--id ID]")
	id := fs.String("id", "k"+time.Now().UTC().Format("20060102"), "the key's id, stored in every payload it seals")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	fmt.Fprintln(e.Stdout, codec.NewKey(*id))
	return nil
}
