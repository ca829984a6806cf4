package shard

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
)

// testSession is the least session timeout Kafka (and kfake) accept by default.
const testSession = 6 * time.Second

// settleBound only stops a hung test: nothing is asserted about how long settling takes.
const settleBound = 3 * time.Minute

// testNodes are the nodes every check places: each must be owned by exactly one member.
var testNodes = func() []string {
	nodes := make([]string, 1000)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("gpu-node-%04d", i)
	}
	return nodes
}()

// view is what a member owns at one moment.
type view struct {
	ok         bool
	gen        int64
	partitions int   // the topic's count the member maps with
	parts      []int // owned partitions, sorted
	nodes      []int // indexes in testNodes of the nodes it owns, sorted
}

func (v view) String() string {
	if !v.ok {
		return "none"
	}
	return fmt.Sprintf("G %d T %d P %s N %s", v.gen, v.partitions, ints(v.parts), ints(v.nodes))
}

func ints(a []int) string {
	s := make([]string, len(a))
	for i, n := range a {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func parseView(line string) (view, error) {
	if line == "none" {
		return view{}, nil
	}
	var v view
	var parts, nodes string
	if _, err := fmt.Sscanf(line, "G %d T %d P %s N %s", &v.gen, &v.partitions, &parts, &nodes); err != nil {
		return view{}, fmt.Errorf("member line %q: %w", line, err)
	}
	v.ok = true
	for _, f := range []struct {
		s    string
		into *[]int
	}{{parts, &v.parts}, {nodes, &v.nodes}} {
		for _, x := range strings.Split(f.s, ",") {
			n, err := strconv.Atoi(x)
			if err != nil {
				return view{}, fmt.Errorf("member line %q: %w", line, err)
			}
			*f.into = append(*f.into, n)
		}
	}
	return v, nil
}

// viewOf reads g's current generation through Assignment, as the runner does.
func viewOf(g *Group) view {
	s := g.state.Load()
	a, ok := g.Assignment()
	if s == nil || !ok || a.Generation != s.id {
		return view{}
	}
	v := view{ok: true, gen: a.Generation, partitions: s.partitions}
	for p, owned := range s.owned {
		if owned {
			v.parts = append(v.parts, p)
		}
	}
	for i, n := range testNodes {
		if a.Owns(n) {
			v.nodes = append(v.nodes, i)
		}
	}
	return v
}

type member interface {
	view() view
	name() string
}

type inProcess struct {
	n string
	g *Group
}

func (m inProcess) view() view   { return viewOf(m.g) }
func (m inProcess) name() string { return m.n }

// subprocess is a member in a process of its own (this test binary running
// TestMemberProcess), so that it can be killed without leaving the group.
type subprocess struct {
	n    string
	cmd  *exec.Cmd
	mu   sync.Mutex
	last view
	err  error
}

func (m *subprocess) name() string { return m.n }
func (m *subprocess) view() view {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

const memberEnv = "SLICEMETER_SHARD_TEST_MEMBER" // brokers|group|topic

func startSubprocess(t *testing.T, name string, cfg Config) *subprocess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemberProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), memberEnv+"="+strings.Join(cfg.Cluster.Brokers, ",")+"|"+cfg.Group+"|"+cfg.Topic)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &subprocess{n: name, cmd: cmd}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "member: ")
			if !ok {
				continue // the testing package's own lines
			}
			v, err := parseView(line)
			m.mu.Lock()
			if err != nil {
				m.err = err
			} else {
				m.last = v
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// TestMemberProcess is a group member for startSubprocess: it prints what it owns whenever
// that changes, until it is killed.
func TestMemberProcess(t *testing.T) {
	env := os.Getenv(memberEnv)
	if env == "" {
		t.Skip("a member process for the group tests")
	}
	f := strings.Split(env, "|")
	ctx, cancel := context.WithTimeout(context.Background(), 2*settleBound) // if the parent never kills it
	defer cancel()
	g, err := Start(ctx, testConfig(kafkaconn.ParseBrokers(f[0]), f[1], f[2]), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	last := "-"
	for ctx.Err() == nil {
		if s := viewOf(g).String(); s != last {
			fmt.Println("member: " + s)
			last = s
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testConfig(brokers []string, group, topic string) Config {
	return Config{Cluster: kafkaconn.Cluster{Brokers: brokers}, Group: group, Topic: topic, Partitions: 64, SessionTimeout: testSession}
}

// settled waits until the members own every partition exactly once in one generation after
// after, and every test node exactly once; it returns that generation.
func settled(t *testing.T, after int64, members ...member) int64 {
	t.Helper()
	deadline := time.Now().Add(settleBound)
	var why string
	for time.Now().Before(deadline) {
		why = settledNow(after, members)
		if why == "" {
			return members[0].view().gen
		}
		time.Sleep(20 * time.Millisecond)
	}
	var state []string
	for _, m := range members {
		state = append(state, m.name()+": "+m.view().String())
	}
	t.Fatalf("not settled after %s: %s\n%s", settleBound, why, strings.Join(state, "\n"))
	return 0
}

func settledNow(after int64, members []member) string {
	var gen int64
	var partitions int
	var parts, nodes []int
	for i, m := range members {
		if s, ok := m.(*subprocess); ok {
			s.mu.Lock()
			err := s.err
			s.mu.Unlock()
			if err != nil {
				return err.Error()
			}
		}
		v := m.view()
		switch {
		case !v.ok:
			return m.name() + " owns nothing"
		case v.gen <= after:
			return fmt.Sprintf("%s is in generation %d, not after %d", m.name(), v.gen, after)
		case i > 0 && (v.gen != gen || v.partitions != partitions):
			return fmt.Sprintf("%s: generation %d of %d partitions, others %d of %d", m.name(), v.gen, v.partitions, gen, partitions)
		}
		gen, partitions = v.gen, v.partitions
		parts, nodes = append(parts, v.parts...), append(nodes, v.nodes...)
	}
	slices.Sort(parts)
	slices.Sort(nodes)
	for i := range partitions {
		if i >= len(parts) || parts[i] != i || len(parts) != partitions {
			return fmt.Sprintf("partitions owned %v, want each of 0-%d once", parts, partitions-1)
		}
	}
	for i := range testNodes {
		if i >= len(nodes) || nodes[i] != i || len(nodes) != len(testNodes) {
			return fmt.Sprintf("%d node ownerships for %d nodes, or a node owned twice or not at all", len(nodes), len(testNodes))
		}
	}
	return ""
}

// TestGroupKfake and TestGroupKafka run the same sequence on kfake and a real broker.
func TestGroupKfake(t *testing.T) {
	groupSequence(t, localtest.FakeKafka(t))
}

func TestGroupKafka(t *testing.T) {
	groupSequence(t, kafkaconn.ParseBrokers(localtest.Kafka(t).Brokers()))
}

// groupSequence grows the group from 1 to 3 members (one a process of its own), SIGKILLs that
// one (the survivors take its partitions after the session timeout), then closes one (the
// last takes everything at once). The topic exists with 12 partitions beforehand: the count
// comes from Kafka, not from Config.Partitions (64).
func groupSequence(t *testing.T, brokers []string) {
	ctx, cancel := context.WithTimeout(context.Background(), settleBound)
	defer cancel()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36) // the shared broker keeps other tests' groups
	topic, group := "shards-"+suffix, "attribution-"+suffix
	if err := (kafkaconn.Cluster{Brokers: brokers}).EnsureTopics(ctx, 12, topic); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(brokers, group, topic)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := func(name string) inProcess {
		g, err := Start(context.Background(), cfg, logger, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		return inProcess{name, g}
	}

	a := start("a")
	gen := settled(t, 0, a)
	if v := a.view(); v.partitions != 12 || len(v.parts) != 12 {
		t.Fatalf("one member: %s; want all 12 partitions of the existing topic", v)
	}
	b := startSubprocess(t, "b (process)", cfg)
	gen = settled(t, gen, a, b)
	c := start("c")
	gen = settled(t, gen, a, b, c)
	for _, m := range []member{a, b, c} {
		if n := len(m.view().parts); n != 4 {
			t.Errorf("3 members: %s owns %d partitions, want 4 of 12", m.name(), n)
		}
	}

	killed := time.Now()
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gen = settled(t, gen, a, c)
	t.Logf("takeover after SIGKILL: %s (session timeout %s)", time.Since(killed).Round(10*time.Millisecond), testSession)

	left := time.Now()
	if err := c.g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.g.Assignment(); ok {
		t.Error("a closed member still owns nodes")
	}
	settled(t, gen, a)
	t.Logf("takeover after a clean leave: %s", time.Since(left).Round(10*time.Millisecond))
}

// TestPartitionsAdded: when the topic grows while members run, they all map with the new
// count once the group has rebalanced (kafka-go's partition watcher ends the generation).
func TestPartitionsAdded(t *testing.T) {
	localtest.SkipShort(t, "a partition watch interval (10 s)")
	brokers := localtest.FakeKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), settleBound)
	defer cancel()
	const topic, group = "shards", "attribution"
	if err := (kafkaconn.Cluster{Brokers: brokers}).EnsureTopics(ctx, 4, topic); err != nil {
		t.Fatal(err)
	}
	var members []member
	for _, name := range []string{"a", "b"} {
		g, err := Start(context.Background(), testConfig(brokers, group, topic), slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		members = append(members, inProcess{name, g})
	}
	gen := settled(t, 0, members...)
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	res, err := client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: topic, Count: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range res.Errors {
		if err != nil {
			t.Fatal(err)
		}
	}
	for {
		gen = settled(t, gen, members...)
		if members[0].view().partitions == 10 {
			break
		}
	}
}

// TestSecureKafka: the group joins over SASL_SSL with the Kafka security options, and
// refused credentials stop Open at start.
func TestSecureKafka(t *testing.T) {
	sk := localtest.NewSecureKafka(t)
	u := sk.User(kafkaconn.MechanismSCRAMSHA512)
	// What the --attribution.shard.* and --kafka.* flags give (cmd/slicemeter's TestShardFlags).
	opts := func(passwordFile string) *Options {
		return &Options{Brokers: sk.SASLSSLBrokers(), Group: DefaultGroup, Topic: DefaultTopic, Partitions: DefaultPartitions, SessionTimeout: 6 * time.Second,
			Security: kafkaconn.SecurityConfig{CAFile: sk.TLS.CAFile, CertFile: sk.TLS.ClientCert, KeyFile: sk.TLS.ClientKey,
				Mechanism: u.Mechanism, Username: u.Name, PasswordFile: passwordFile}}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	g, err := opts(u.PasswordFile).Open(context.Background(), logger, nil)
	if err != nil || g == nil {
		t.Fatalf("Open: %v, %v", g, err)
	}
	defer g.Close()
	settled(t, 0, inProcess{"secure", g})
	if v := viewOf(g); v.partitions != DefaultPartitions {
		t.Errorf("created topic: %d partitions, want %d", v.partitions, DefaultPartitions)
	}

	if g, err := opts(sk.WrongPasswordFile).Open(context.Background(), logger, nil); err == nil || !kafkaconn.Refused(err) {
		_ = g.Close()
		t.Errorf("Open with a wrong password: %v; want the brokers' refusal", err)
	}
}
