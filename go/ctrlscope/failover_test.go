package ctrlscope

// A failover to a replica that lacks frames Redis confirmed (protocol/redis-layout.md, "Writing a
// frame", step 6): the publisher finds it by its pubseq entries, rewrites the topic with a reset
// frame and counts the lost records as dropped. First without Sentinel (the keys restored as they
// were a few frames earlier), then a real one: Debian's redis-server ×2 and redis-sentinel, the
// master killed while the replica is cut off, as tests/telemetry/test_sentinel.py does in Python.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestARedisBackWithoutFramesItConfirmedHasTheTopicRewrittenAndTheLossCounted(t *testing.T) {
	p, rdb, prefix := newTestPublisher(t, PublisherOptions{})
	ctx := context.Background()
	keys := []string{prefix + "stream:t", prefix + "snap:t", prefix + "pubseq:t"}
	flush := func() {
		t.Helper()
		if _, err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		p.Publish("t", rec(i))
		p.SetState("t", fmt.Sprintf("k%d", i%3), []byte(strconv.Itoa(i)))
		flush()
	}
	saved := map[string]string{}
	for _, k := range keys {
		saved[k] = rdb.Dump(ctx, k).Val()
	}
	for i := 4; i < 19; i++ { // five frames of three records the "replica" never gets
		p.Publish("t", rec(i))
		p.SetState("t", fmt.Sprintf("k%d", i%3), []byte(strconv.Itoa(i)))
		if i%3 == 0 {
			flush()
		}
	}
	if c := p.topics["t"].confirmed; c != 9 {
		t.Fatalf("confirmed seq %d, want 9", c)
	}
	_ = p.lost(nil) // what the loop does on a failed call
	p.Publish("t", rec(19))
	flush() // the same Redis, nothing lost: no reset
	if last := frames(t, rdb, prefix, "t"); last[len(last)-1]["reset"] != nil || p.FramesLost.Load() != 0 {
		t.Fatalf("a reconnect to a Redis that kept everything reset the topic: %v", last[len(last)-1])
	}
	p.Publish("t", rec(20))
	flush()
	for k, data := range saved {
		if err := rdb.RestoreReplace(ctx, k, 0, data).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_ = p.lost(nil)
	p.Publish("t", rec(21))
	flush()
	all := frames(t, rdb, prefix, "t")
	last := all[len(all)-1]
	r, _ := last["r"].([]any)
	if last["reset"] != true || len(r) != 1 || last["dropped"] != float64(17) {
		t.Fatalf("after the loss: %v; want a reset frame carrying record 21 and dropped 17", last)
	}
	if p.RecordsLost.Load() != 17 || p.FramesLost.Load() != 7 {
		t.Fatalf("lost %d frames, %d records; want 7, 17", p.FramesLost.Load(), p.RecordsLost.Load())
	}
	snap := rdb.HGetAll(ctx, keys[1]).Val()
	delete(snap, "__id__")
	want := map[string]string{"k0": "18", "k1": "16", "k2": "17"}
	if fmt.Sprint(snap) != fmt.Sprint(want) {
		t.Fatalf("the hash is %v, want the publisher's state %v", snap, want)
	}
}

func TestAConnectionRedialedBehindThePublishersBackIsRefusedUntilChecked(t *testing.T) {
	p, rdb, prefix := newTestPublisher(t, PublisherOptions{})
	ctx := context.Background()
	p.Publish("t", rec(0))
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := p.Redis().ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the FIN reaches the client; go-redis' pool sees a dead connection
	p.Publish("t", rec(1))
	_, err = p.Flush(ctx)
	if !errors.Is(err, errReconnected) {
		t.Fatalf("a frame went out on a connection dialed behind the publisher's back (err %v)", err)
	}
	if p.Connected() {
		t.Fatal("still counted as connected")
	}
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := frames(t, rdb, prefix, "t")
	if len(got) != 2 || got[1]["reset"] != nil || got[1]["seq"] != float64(2) {
		t.Fatalf("after the check, the frame goes out as it was: %v", got)
	}
}

// --- a real Sentinel ------------------------------------------------------------------------

func redisBinaries(t *testing.T) (string, string) {
	server, err1 := exec.LookPath("redis-server")
	sentinel, err2 := exec.LookPath("redis-sentinel")
	if err1 != nil || err2 != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server or redis-sentinel missing in CI: .ci/run installs Debian's redis-server and redis-sentinel")
		}
		t.Skip("redis-server and redis-sentinel not installed (apt-get install redis-server redis-sentinel; .ci/run does)")
	}
	return server, sentinel
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func spawn(t *testing.T, dir, name string, argv ...string) *exec.Cmd {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("--- %s\n%s", name, b[max(0, len(b)-1500):])
		}
	})
	return cmd
}

// waitWithin polls cond every millisecond for up to timeout.
func waitWithin(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (%v)", what, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func replicationInfo(port int) string {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	return c.Info(context.Background(), "replication").Val()
}

func TestASentinelFailoverToALaggingReplicaIsAResetWithTheLossCounted(t *testing.T) {
	server, sentinelBin := redisBinaries(t)
	testRedis(t) // not used, but CI has one: the same skip rule as every test here
	dir := t.TempDir()
	masterPort, replicaPort, sentinelPort := freePort(t), freePort(t), freePort(t)
	common := []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no",
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
	var master *exec.Cmd
	for _, s := range []struct {
		name  string
		port  int
		extra []string
	}{{"master", masterPort, nil}, {"replica", replicaPort, []string{"--replicaof", "127.0.0.1", strconv.Itoa(masterPort)}}} {
		data := filepath.Join(dir, s.name)
		_ = os.Mkdir(data, 0o755)
		args := append([]string{server, "--port", strconv.Itoa(s.port), "--dir", data}, common...)
		cmd := spawn(t, dir, s.name, append(args, s.extra...)...)
		if s.name == "master" {
			master = cmd
		}
	}
	waitWithin(t, "the replica in sync", 15*time.Second, func() bool {
		return strings.Contains(replicationInfo(replicaPort), "master_link_status:up")
	})
	conf := filepath.Join(dir, "sentinel.conf")
	_ = os.WriteFile(conf, []byte(fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n"+
		"sentinel monitor ctrlscope 127.0.0.1 %d 1\nsentinel down-after-milliseconds ctrlscope 1000\n"+
		"sentinel failover-timeout ctrlscope 5000\n", sentinelPort, dir, masterPort)), 0o644)
	spawn(t, dir, "sentinel", sentinelBin, conf)
	sentinel := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(sentinelPort), DialTimeout: time.Second})
	defer sentinel.Close()
	ctx := context.Background()
	waitWithin(t, "the Sentinel knows the replica", 20*time.Second, func() bool {
		r, err := sentinel.Replicas(ctx, "ctrlscope").Result()
		return err == nil && len(r) >= 1
	})

	p, err := NewPublisher(fmt.Sprintf("redis+sentinel://127.0.0.1:%d/ctrlscope/0", sentinelPort),
		PublisherOptions{Prefix: "ctrlscope-go-sentinel:"})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	var published atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // ~1,000 records a second and state changes with them
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p.Publish("t", rec(i))
			p.SetState("t", fmt.Sprintf("k%d", i%50), []byte(strconv.Itoa(i)))
			published.Store(int64(i + 1))
			time.Sleep(time.Millisecond)
		}
	}()
	// The seq of the last frame of topic t a server applied (its pubseq entry for the publisher).
	replica := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(replicaPort)})
	defer replica.Close()
	masterClient := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(masterPort)})
	defer masterClient.Close()
	applied := func(c *redis.Client) int64 {
		n, _ := c.HGet(ctx, "ctrlscope-go-sentinel:pubseq:t", p.Name()).Int64()
		return n
	}
	// The replica has the publisher's data (its epoch key among it; else the failover is a new
	// epoch, a case of its own), then is cut off (it keeps its data and stays a replica) while the
	// master applies frames it never gets; then the master dies: asynchronous replication's window,
	// made long. Both read on the servers, not guessed from the publisher's counters (CI, busy,
	// once cut the replica before it had anything).
	waitWithin(t, "the replica has 20 frames", 10*time.Second, func() bool { return applied(replica) >= 20 })
	if err := replica.SlaveOf(ctx, "127.0.0.1", strconv.Itoa(freePort(t))).Err(); err != nil {
		t.Fatal(err)
	}
	cut := applied(replica)
	waitWithin(t, "frames the replica lacks", 5*time.Second, func() bool { return applied(masterClient) > cut+5 })
	_ = master.Process.Signal(syscall.SIGKILL)
	waitWithin(t, "the Sentinel promoting the replica", 30*time.Second, func() bool {
		addr, err := sentinel.GetMasterAddrByName(ctx, "ctrlscope").Result()
		return err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(replicaPort)
	})
	atFailover := p.FramesPublished.Load()
	waitWithin(t, "frames on the new master", 20*time.Second, func() bool {
		return p.Connected() && p.FramesPublished.Load() > atFailover+10
	})
	close(stop)
	<-done
	p.Stop(5 * time.Second)

	rows, err := replica.XRange(ctx, "ctrlscope-go-sentinel:stream:t", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var records, dropped, resets int64
	var last int64
	for _, row := range rows {
		var f struct {
			R       []json.RawMessage `json:"r"`
			Src     string            `json:"src"`
			Seq     int64             `json:"seq"`
			Reset   bool              `json:"reset"`
			Dropped int64             `json:"dropped"`
		}
		if err := json.Unmarshal([]byte(row.Values["f"].(string)), &f); err != nil {
			t.Fatal(err)
		}
		if f.Src != p.Name() {
			continue
		}
		if f.Seq <= last {
			t.Fatalf("seq %d after %d: a frame applied twice", f.Seq, last)
		}
		if last > 0 && f.Seq > last+1 && !f.Reset {
			t.Fatalf("frames %d..%d missing without a reset frame: a silent gap", last+1, f.Seq-1)
		}
		if f.Reset {
			resets++
		}
		records += int64(len(f.R))
		dropped += f.Dropped
		last = f.Seq
	}
	if p.FramesLost.Load() == 0 || p.RecordsLost.Load() == 0 || resets == 0 {
		t.Fatalf("the new master lacked confirmed frames, and the publisher did not see it: %d frames, %d records lost, %d resets",
			p.FramesLost.Load(), p.RecordsLost.Load(), resets)
	}
	if records+dropped != published.Load() || dropped != p.RecordsLost.Load() {
		t.Fatalf("published %d records; the new master holds %d and reports %d dropped (the publisher lost %d)",
			published.Load(), records, dropped, p.RecordsLost.Load())
	}
	snap := replica.HGetAll(ctx, "ctrlscope-go-sentinel:snap:t").Val()
	n := published.Load()
	for k := int64(0); k < 50 && k < n; k++ {
		lastI := n - 1 - ((n-1-k)%50+50)%50
		if got := snap[fmt.Sprintf("k%d", k)]; got != strconv.FormatInt(lastI, 10) {
			t.Fatalf("k%d on the new master is %q, want %d: the hash is not the publisher's state", k, got, lastI)
		}
	}
	t.Logf("published %d records in %d frames; lost in the failover: %d frames, %d records (reported as dropped)",
		n, last, p.FramesLost.Load(), p.RecordsLost.Load())
	replica.Del(ctx, "ctrlscope-go-sentinel:stream:t", "ctrlscope-go-sentinel:snap:t")
}
