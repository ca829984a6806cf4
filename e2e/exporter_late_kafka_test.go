package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// lateScenario is spoolScenario cut to 40 s.
var lateScenario = strings.Replace(strings.Replace(spoolScenario, "duration: 70s", "duration: 40s", 1), "end: 70s", "end: 40s", 1)

// The real broker is down when the exporter starts (no --spool.dir: the memory queue): it samples
// and serves /metrics at once, /readyz names Kafka, and once the broker is up the topic is made
// and every sample arrives.
func TestExporterStartsBeforeKafka(t *testing.T) {
	t.Parallel()
	kfk := localtest.NewKafka(t)
	if err := kfk.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	file := writeFile(t, "late.yaml", strings.Replace(lateScenario, "name: spool-outage", "name: late-kafka", 1))
	want := simulated(t, loadScenario(t, file))

	exp := apptest.Start(t, ctx, apptest.Service{Command: "exporter", NoReadyz: true, Args: []string{
		"--source", "sim", "--scenario", file, "--kafka.brokers", kfk.Brokers(), "--kafka.flush-interval", "1s", "--kafka.partitions", "2"}})
	body := func(path string) (int, string) {
		resp, err := http.Get(exp.URL(path))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for {
		code, text := body("/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(text, "kafka: ") {
			t.Logf("/readyz without Kafka: %q", text)
			break
		}
		if code == http.StatusOK {
			t.Fatalf("/readyz answers ready while Kafka is down")
		}
		select {
		case <-exp.Done():
			t.Fatalf("the exporter exited without Kafka:\n%s", exp.LogTail(20))
		case <-ctx.Done():
			t.Fatalf("/readyz never named Kafka: %d %q", code, text)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if code, text := body("/metrics"); code != http.StatusOK || !strings.Contains(text, "slicemeter_exporter_kafka_up 0") ||
		!strings.Contains(text, "slicemeter_exporter_memory_queue_batches") {
		t.Errorf("/metrics without Kafka: %d, kafka_up 0 and the memory queue in it: %v", code, strings.Contains(text, "slicemeter_exporter_kafka_up 0"))
	}
	if err := kfk.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Log("Kafka started")
	if err := exp.Wait(ctx); err != nil {
		t.Fatalf("exporter: %v\n%s", err, exp.LogTail(30))
	}
	got, batches := consume(t, ctx, kfk.Brokers(), 2*len(want)) // all of it: duplicates count in consume
	seen := map[string]bool{}
	for _, s := range got {
		seen[fmt.Sprintf("%s@%d", s.InstanceId, s.TsNs)] = true
	}
	missing := 0
	for k := range want {
		if !seen[k] {
			missing++
		}
	}
	if missing != 0 {
		t.Fatalf("%d of %d samples missing\n%s", missing, len(want), exp.LogTail(30))
	}
	t.Logf("%d samples in %d batches, all delivered", len(seen), len(batches))
}
