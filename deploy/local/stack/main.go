// Command stack starts what slicemeter's separate processes need on one machine — a
// ClickHouse server and an Apache Kafka broker (KRaft), on loopback, on free ports, in a
// temporary directory — with the same code the tests and the demo use (deploy/local), prints
// their addresses and runs until interrupted, then stops both and removes their directories.
//
//	go run ./deploy/local/stack [--env-file FILE] [--database NAME] [--keep]
//
// Stdout gets one shell assignment per service once both answer:
//
//	KAFKA=127.0.0.1:PORT
//	CLICKHOUSE=clickhouse://127.0.0.1:PORT/slicemeter
//
// and --env-file FILE gets the same lines, written only then (atomically), so that a script can
// wait for the file and source it. What it needs (ClickHouse, Java, Kafka's jars) is what
// `make deps` installs; the jars are fetched into the cache on first use.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		var usage usageError
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a bad flag: exit status 2.
type usageError struct{ error }

// startTimeout bounds the start of both services (Kafka's first start fetches its jars).
const startTimeout = 10 * time.Minute

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	envFile := fs.String("env-file", "", "also write the KAFKA= and CLICKHOUSE= lines to this file once both services answer")
	database := fs.String("database", "slicemeter", "the database named in the ClickHouse DSN (slicemeter migrate creates it)")
	keep := fs.Bool("keep", false, "leave the services' directories (config, data, logs) in place when stopped")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q: expected only flags", fs.Arg(0))}
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	// Both at once: Kafka's JVM takes the longer.
	var ch *local.ClickHouse
	var k *local.Kafka
	var chErr, kErr error
	done := make(chan struct{}, 2)
	go func() {
		ch, chErr = local.StartClickHouse(startCtx, local.ClickHouseOptions{KeepDir: *keep, Logger: logger})
		done <- struct{}{}
	}()
	go func() {
		k, kErr = local.StartKafka(startCtx, local.KafkaOptions{KeepDir: *keep, Logger: logger})
		done <- struct{}{}
	}()
	<-done
	<-done
	if chErr == nil {
		defer closeLogged(logger, "ClickHouse", ch)
	}
	if kErr == nil {
		defer closeLogged(logger, "Kafka", k)
	}
	if err := errors.Join(wrap("starting ClickHouse", chErr), wrap("starting Kafka", kErr)); err != nil {
		return err
	}

	lines := fmt.Sprintf("KAFKA=%s\nCLICKHOUSE=%s\n", k.Brokers(), ch.DSN(*database))
	if *envFile != "" {
		if err := writeAtomically(*envFile, lines); err != nil {
			return err
		}
		defer os.Remove(*envFile) // the addresses are gone with the services
	}
	if _, err := io.WriteString(stdout, lines); err != nil {
		return err
	}
	logger.Info("ClickHouse and Kafka are running; stop them with Ctrl-C or SIGTERM",
		"clickhouse", ch.Addr(), "kafka", k.Brokers(), "clickhouse_dir", ch.Dir(), "kafka_dir", k.Dir())
	<-ctx.Done()
	logger.Info("stopping ClickHouse and Kafka")
	return nil
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// closeLogged stops a service, logging a failure (the exit is already decided).
func closeLogged(logger *slog.Logger, name string, c interface{ Close() error }) {
	if err := c.Close(); err != nil {
		logger.Warn("stopping "+name, "err", err)
	}
}

// writeAtomically writes content to path through a temporary file renamed into place, so
// that a reader waiting for the file never sees half of it.
func writeAtomically(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
