package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// The real broker, its samples topic limited to small messages (max.message.bytes 2048), is
// paused with SIGSTOP for 15 s while the exporter samples in real time with 5 s flushes
// (batches of about 15 kB): batches are split to fit the topic, wait in the spool while Kafka
// does not answer, and every sample produced arrives once it resumes; nothing is dropped and
// the exporter exits 0.
func TestExporterThroughPausedKafkaAndSmallMessages(t *testing.T) {
	t.Parallel()
	kfk := localtest.NewKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	brokers := kafkaconn.ParseBrokers(kfk.Brokers())
	if err := (kafkaconn.Cluster{Brokers: brokers}).EnsureTopics(ctx, 2, pb.TopicSamples); err != nil {
		t.Fatal(err)
	}
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	res, err := client.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: pb.TopicSamples,
		Configs: []kafka.AlterConfigRequestConfig{{Name: "max.message.bytes", Value: "2048"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors {
		if e != nil {
			t.Fatal(e)
		}
	}
	file := writeFile(t, "paused.yaml", strings.Replace(lateScenario, "name: spool-outage", "name: paused-kafka", 1))
	want := simulated(t, loadScenario(t, file))

	exp := apptest.StartExporter(t, ctx, "--source", "sim", "--scenario", file,
		"--kafka.brokers", kfk.Brokers(), "--kafka.flush-interval", "5s", "--spool.dir", t.TempDir())
	// The first flush (5 s) goes through before the pause.
	exp.WaitMetric(t, time.Minute, "slicemeter_exporter_batches_published_total", 1)
	pid := kfk.Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer resume()
	t.Log("Kafka paused")
	time.Sleep(15 * time.Second) // the scenario: a broker that does not answer for 15 s, three flushes
	resume()
	t.Log("Kafka resumed")
	if err := exp.Wait(ctx); err != nil {
		t.Fatalf("exporter: %v\n%s", err, exp.LogTail(30))
	}
	if !strings.Contains(exp.Log(), "max_message_bytes=2048") {
		t.Errorf("the exporter did not read the topic's max.message.bytes\n%s", exp.LogTail(30))
	}
	// Read everything (consume stops at its count, and a write whose acknowledgement was lost
	// in the pause arrives twice: at least once).
	got, batches := consume(t, ctx, kfk.Brokers(), 2*len(want))
	seen := map[string]bool{}
	for _, s := range got {
		seen[fmt.Sprintf("%s@%d", s.InstanceId, s.TsNs)] = true
	}
	if dup := len(got) - len(seen); dup > 0 {
		t.Logf("%d samples arrived twice", dup)
	}
	missing := 0
	for k := range want {
		if !seen[k] {
			missing++
		}
	}
	if missing != 0 {
		t.Fatalf("%d of %d samples missing (none may be dropped)\n%s", missing, len(want), exp.LogTail(30))
	}
	if len(batches) < 3*len(want)/150 {
		t.Errorf("%d batches for %d samples: the 5 s batches were not split to fit 2048 bytes", len(batches), len(want))
	}
	t.Logf("%d samples in %d batches, all delivered", len(seen), len(batches))
}
