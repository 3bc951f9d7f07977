package ctrlscope

// The slot map of a publisher's cluster client, read over connections of its own.
//
// go-redis reloads a ClusterClient's slot map by itself, in a goroutine of its own: after a MOVED or
// a READONLY reply, and every ClusterStateReloadInterval. By default the reload sends CLUSTER SLOTS
// to a random node over that node's pool, the pool the publisher's frames use. The publisher keeps one
// connection per node and refuses any connection made while it counts itself connected (the dial
// guard: no frame may reach a server nobody checked, e.g. a promoted replica that lacks what the old
// master confirmed). A reload that meets the flush goroutine on a master's one connection makes the
// pool dial a second one, the guard refuses it, and whichever call got it fails: a healthy publisher
// logged a reconnect (TestPublisherSurvivesAMasterKill, once in a loaded CI run). With ClusterSlots
// set, go-redis asks this source instead, which has a client of its own per node, so no reload ever
// takes or makes a connection of the data pools.

import (
	"context"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

type slotSource struct {
	seeds    []string
	password string
	timeout  time.Duration
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)

	mu      sync.Mutex
	known   []string                 // every node of the last map, then the seeds
	clients map[string]*redis.Client // one connection per node, never a data pool's
}

func newSlotSource(seeds []string, password string, timeout time.Duration,
	dial func(ctx context.Context, network, addr string) (net.Conn, error)) *slotSource {
	return &slotSource{seeds: seeds, password: password, timeout: timeout, dial: dial,
		clients: map[string]*redis.Client{}}
}

// ClusterSlots is go-redis' ClusterOptions.ClusterSlots: the first answer of the known nodes, tried
// in random order (as go-redis' own reload does).
func (s *slotSource) ClusterSlots(ctx context.Context) ([]redis.ClusterSlot, error) {
	s.mu.Lock()
	addrs := append(append([]string(nil), s.known...), s.seeds...)
	s.mu.Unlock()
	var firstErr error
	for _, i := range rand.Perm(len(addrs)) {
		slots, err := s.client(addrs[i]).ClusterSlots(ctx).Result()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		slots = withOriginHost(slots, addrs[i])
		var known []string
		for _, slot := range slots {
			for _, n := range slot.Nodes {
				if !slices.Contains(known, n.Addr) {
					known = append(known, n.Addr)
				}
			}
		}
		s.mu.Lock()
		s.known = known
		s.mu.Unlock()
		return slots, nil
	}
	return nil, firstErr
}

func (s *slotSource) client(addr string) *redis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[addr]
	if c == nil {
		c = redis.NewClient(&redis.Options{Addr: addr, Password: s.password, Dialer: s.dial, PoolSize: 1,
			MaxRetries: -1, DialerRetries: 1, DialTimeout: s.timeout, ReadTimeout: s.timeout,
			WriteTimeout: s.timeout})
		s.clients[addr] = c
	}
	return c
}

func (s *slotSource) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for addr, c := range s.clients {
		_ = c.Close()
		delete(s.clients, addr)
	}
}

// withOriginHost: a node that names itself by a loopback address is at the host it was asked at, as
// go-redis' own reload assumes (a cluster announcing 127.0.0.1 reached through another address).
func withOriginHost(slots []redis.ClusterSlot, origin string) []redis.ClusterSlot {
	originHost, _, err := net.SplitHostPort(origin)
	if err != nil || isLoopback(originHost) {
		return slots
	}
	for i := range slots {
		for j, n := range slots[i].Nodes {
			host, port, err := net.SplitHostPort(n.Addr)
			if err == nil && isLoopback(host) {
				slots[i].Nodes[j].Addr = net.JoinHostPort(originHost, port)
			}
		}
	}
	return slots
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
