package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// KafkaVersion is the Apache Kafka release the harness runs; it must match kafka/pom.xml.
const KafkaVersion = "4.4.0"

// kafkaPOM names the broker's jars; embedded so that no working directory is assumed.
//
//go:embed kafka/pom.xml
var kafkaPOM []byte

// CacheDir is where downloaded things are kept between runs: $SLICEMETER_CACHE, else
// $XDG_CACHE_HOME/slicemeter, else ~/.cache/slicemeter.
func CacheDir() (string, error) {
	if d := os.Getenv("SLICEMETER_CACHE"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir() // $XDG_CACHE_HOME or ~/.cache on Linux
	if err != nil {
		return "", fmt.Errorf("finding a cache directory (set SLICEMETER_CACHE): %w", err)
	}
	return filepath.Join(base, "slicemeter"), nil
}

// libsMarker is written into a cache directory after a complete download; it holds the pom's
// SHA-256, so a changed pom triggers a new download. install-deps.sh writes the same.
const libsMarker = "libs.complete"

// KafkaLibs returns the directory of the broker's jars, downloading them from Maven Central
// with mvn the first time. Concurrent callers (several test binaries) wait for one download.
func KafkaLibs(ctx context.Context, log *slog.Logger) (string, error) {
	return mavenLibs(ctx, log, "Kafka", "kafka-"+KafkaVersion, kafkaPOM)
}

// mavenLibs returns CacheDir()/dirName/libs holding the jars that pom names, fetched with mvn
// from Maven Central once, under a lock, and marked complete only after the whole download.
func mavenLibs(ctx context.Context, log *slog.Logger, what, dirName string, pom []byte) (string, error) {
	log = orDefault(log)
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	home := filepath.Join(cache, dirName)
	libs := filepath.Join(home, "libs")
	sum := sha256.Sum256(pom)
	want := hex.EncodeToString(sum[:])
	complete := func() bool {
		b, err := os.ReadFile(filepath.Join(home, libsMarker))
		return err == nil && strings.TrimSpace(string(b)) == want
	}
	if complete() {
		return libs, nil
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("creating %s's cache directory: %w", what, err)
	}
	unlock, err := lockFile(ctx, filepath.Join(home, ".lock"))
	if err != nil {
		return "", fmt.Errorf("locking %s's cache directory %s: %w", what, home, err)
	}
	defer unlock()
	if complete() { // another process finished while this one waited
		return libs, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("the %s jars are not in %s and mvn, which fetches them, is missing: "+installHint, what, libs, "maven openjdk-17-jre-headless")
	}
	pomFile := filepath.Join(home, "pom.xml")
	if err := os.WriteFile(pomFile, pom, 0o644); err != nil {
		return "", fmt.Errorf("writing %s's pom.xml: %w", what, err)
	}
	// Download beside libs and rename: an interrupted download never looks complete.
	tmp := libs + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("removing a partial download: %w", err)
	}
	log.Info("fetching jars from Maven Central (once)", "for", what, "into", libs)
	began := time.Now()
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-Dstyle.color=never", "-f", pomFile, "dependency:copy-dependencies", "-DoutputDirectory="+tmp)
	cmd.Dir = home
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("fetching %s's jars with %s: %w\n%s", what, strings.Join(cmd.Args, " "), err, lastLines(out.String(), 40))
	}
	if err := os.RemoveAll(libs); err != nil {
		return "", fmt.Errorf("removing an incomplete %s: %w", libs, err)
	}
	if err := os.Rename(tmp, libs); err != nil {
		return "", fmt.Errorf("moving %s's jars into place: %w", what, err)
	}
	if err := os.WriteFile(filepath.Join(home, libsMarker), []byte(want+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("marking %s's jars complete: %w", what, err)
	}
	log.Info("jars fetched", "for", what, "took", time.Since(began).Round(time.Millisecond))
	return libs, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errLocked is returned by tryLock when another process holds the lock.
var errLocked = errors.New("locked by another process")

// lockFile takes an exclusive lock on path, polling until ctx ends; unlock releases it.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := tryLock(f)
		if err == nil {
			return func() { f.Close() }, nil // closing the file releases the lock
		}
		if !errors.Is(err, errLocked) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the lock: %w", context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
