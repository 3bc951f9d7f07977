// Command publish-driver is a Go Publisher driven line by line, so that one Python test holds the
// Python and the Go publisher to the same behaviour (tests/telemetry/test_failover_exactly_once.py:
// a failover with a frame in flight). It publishes where PublisherFromEnv says (REDIS_URL, or
// REDIS_SENTINELS with REDIS_MASTER_NAME; CTRLSCOPE_PREFIX), runs the publisher's own loop, and reads
// one JSON command a line on stdin, answering each with one JSON line on stdout:
//
//	{"op":"publish","topic":T,"records":[...],"state":{"key":value,...}}  publish the records, then set the keys (null deletes)
//	{"op":"stats"}                                                         the publisher's counters
//	{"op":"stop"}                                                          stop (flushing what is left), the counters; then exit
//
// The counters are named as the Python publisher's attributes: name, connected, frames_published,
// frames_lost, records_lost, records_dropped.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

type command struct {
	Op      string                     `json:"op"`
	Topic   string                     `json:"topic"`
	Records []json.RawMessage          `json:"records"`
	State   map[string]json.RawMessage `json:"state"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "publish-driver:", err)
		os.Exit(1)
	}
}

func run() error {
	pub, err := ctrlscope.PublisherFromEnv(ctrlscope.PublisherOptions{FlushInterval: 10 * time.Millisecond})
	if err != nil {
		return err
	}
	pub.Start()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var cmd command
		if err := json.Unmarshal(in.Bytes(), &cmd); err != nil {
			return fmt.Errorf("a command that is not JSON: %w", err)
		}
		switch cmd.Op {
		case "publish":
			for _, r := range cmd.Records {
				pub.Publish(cmd.Topic, r)
			}
			for k, v := range cmd.State {
				if string(v) == "null" {
					v = nil
				}
				pub.SetState(cmd.Topic, k, v)
			}
		case "stats":
		case "stop":
			pub.Stop(5 * time.Second)
		default:
			return fmt.Errorf("unknown op %q", cmd.Op)
		}
		if err := out.Encode(stats(pub)); err != nil {
			return err
		}
		if cmd.Op == "stop" {
			return nil
		}
	}
	pub.Stop(5 * time.Second)
	return in.Err()
}

func stats(p *ctrlscope.Publisher) map[string]any {
	return map[string]any{
		"name":             p.Name(),
		"connected":        p.Connected(),
		"frames_published": p.FramesPublished.Load(),
		"frames_lost":      p.FramesLost.Load(),
		"records_lost":     p.RecordsLost.Load(),
		"records_dropped":  p.RecordsDropped.Load(),
	}
}
