package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pattern sends n requests and returns which were aborted (status 418... any non-200).
func pattern(f *fixture, n int, hdr ...string) []bool {
	out := make([]bool, n)
	for i := range out {
		resp, _ := f.post("/v1/chat/completions", chatBody(false), hdr...)
		out[i] = resp.StatusCode != 200
	}
	return out
}

func count(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

func TestEvenSpreadIsExact(t *testing.T) {
	f := newFixture(t, jsonUpstream(200, chatJSON))
	f.addRule(map[string]any{"name": "e", "kind": "abort", "fraction": 0.1})
	hits := pattern(f, 100)
	if count(hits) != 10 {
		t.Fatalf("fraction 0.1 over 100 requests: %d hits", count(hits))
	}
	for i := 0; i < 100; i += 10 {
		if count(hits[i:i+10]) != 1 {
			t.Fatalf("not even: %v", hits)
		}
	}
	for _, fr := range []float64{0.57, 0.3, 0.25, 1.0 / 3} {
		r := newRule(ruleSpec{Name: "x", Kind: kHang, Fraction: fr, Spread: "even"}, 1)
		n := 0
		for i := 0; i < 300; i++ {
			if r.coin() {
				n++
			}
		}
		if want := int(fr*300 + 1e-9); n != want {
			t.Fatalf("fraction %v over 300: %d hits, want %d", fr, n, want)
		}
	}
}

// limit: a burst of exactly N answers, then the rule lets everything through (the breaker suite's
// OOM burst must not depend on how fast the canary is served)
func TestLimitIsABurstThenNone(t *testing.T) {
	f := newFixture(t, jsonUpstream(200, chatJSON))
	f.addRule(map[string]any{"name": "b", "kind": "oom", "limit": 3})
	hits := pattern(f, 10)
	if count(hits) != 3 || !hits[0] || !hits[1] || !hits[2] {
		t.Fatalf("limit 3 at fraction 1 over 10 requests: %v", hits)
	}
	if _, _, h := f.ruleCounters("b"); h != 3 {
		t.Fatalf("hits %d, want 3", h)
	}
	// with a fraction: every 2nd request until 2 are picked, and concurrent coins never pick more
	r := newRule(ruleSpec{Name: "x", Kind: kHang, Fraction: 0.5, Spread: "even", Limit: ptr(int64(2))}, 1)
	got := []bool{}
	for i := 0; i < 8; i++ {
		got = append(got, r.coin())
	}
	if count(got) != 2 || !got[1] || !got[3] {
		t.Fatalf("fraction 0.5, limit 2: %v", got)
	}
	r = newRule(ruleSpec{Name: "y", Kind: kHang, Fraction: 1, Spread: "even", Limit: ptr(int64(5))}, 1)
	var picked atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.coin() {
				picked.Add(1)
			}
		}()
	}
	wg.Wait()
	if picked.Load() != 5 {
		t.Fatalf("64 concurrent requests, limit 5: %d picked", picked.Load())
	}
}

func ptr[T any](v T) *T { return &v }

func TestRandomSpreadIsSeeded(t *testing.T) {
	run := func(seed int) []bool {
		r := newRule(ruleSpec{Name: "x", Kind: kHang, Fraction: 0.3, Spread: "random", Seed: int64(seed)}, 1)
		out := make([]bool, 400)
		for i := range out {
			out[i] = r.coin()
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	same := func(x, y []bool) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) || same(a, c) {
		t.Fatal("random spread not reproducible from its seed")
	}
	if n := count(a); n < 80 || n > 160 {
		t.Fatalf("fraction 0.3 of 400: %d", n)
	}
	f := newFixture(t, jsonUpstream(200, chatJSON))
	f.addRule(map[string]any{"name": "r", "kind": "abort", "fraction": 0.3, "spread": "random", "seed": 7})
	if got := pattern(f, 400); !same(got, a) {
		t.Fatal("the proxy's random pattern differs from the seed's")
	}
}

func TestMatchFilters(t *testing.T) {
	f := newFixture(t, jsonUpstream(200, chatJSON))
	hit := func(path, body string, hdr ...string) bool {
		resp, _ := f.post(path, body, hdr...)
		return resp.StatusCode == 503
	}
	chat, other := chatBody(false), `{"model": "other", "prompt": "x"}`
	cases := []struct {
		match map[string]any
		path  string
		body  string
		hdr   []string
		want  bool
	}{
		{map[string]any{"path": "/v1/chat/completions"}, "/v1/chat/completions", chat, nil, true},
		{map[string]any{"path": "/v1/chat/completions"}, "/v1/completions", chat, nil, false},
		{map[string]any{"path": "/v1/chat/completions"}, "/v1/chat/completions/x", chat, nil, false},
		{map[string]any{"path": "/v1/*"}, "/v1/completions", chat, nil, true},
		{map[string]any{"path": "/v1/*"}, "/v2/completions", chat, nil, false},
		{map[string]any{"path": "*"}, "/anything", chat, nil, true},
		{map[string]any{"model": "sim-model"}, "/v1/chat/completions", chat, nil, true},
		{map[string]any{"model": "sim-model"}, "/v1/chat/completions", other, nil, false},
		{map[string]any{"header": map[string]string{"x-tenant": "a"}}, "/v1/completions", chat, []string{"X-Tenant", "a"}, true},
		{map[string]any{"header": map[string]string{"x-tenant": "a"}}, "/v1/completions", chat, []string{"X-Tenant", "b"}, false},
		{map[string]any{"header": map[string]string{"x-tenant": "a"}}, "/v1/completions", chat, nil, false},
		{map[string]any{"path": "/v1/*", "model": "other", "header": map[string]string{"X-A": "1"}}, "/v1/completions", other, []string{"x-a", "1"}, true},
		{map[string]any{"path": "/v1/*", "model": "other", "header": map[string]string{"X-A": "1"}}, "/v1/completions", chat, []string{"x-a", "1"}, false},
	}
	for i, c := range cases {
		f.addRule(map[string]any{"name": "m", "kind": "abort", "match": c.match})
		if got := hit(c.path, c.body, c.hdr...); got != c.want {
			t.Errorf("case %d: match %v on %s %v: hit=%v", i, c.match, c.path, c.hdr, got)
		}
	}
}

func TestCountersAndOrder(t *testing.T) {
	f := newFixture(t, sseUpstream(3, 0))
	f.addRule(map[string]any{"name": "a-delay", "kind": "delay", "headers_s": 0.001, "match": map[string]any{"path": "/v1/*"}})
	f.addRule(map[string]any{"name": "b-abort", "kind": "abort", "fraction": 0.5, "match": map[string]any{"path": "/v1/*"}})
	f.addRule(map[string]any{"name": "c-stall", "kind": "stall", "after_tokens": 10, "seconds": 1})
	for i := 0; i < 4; i++ {
		f.post("/v1/chat/completions", chatBody(true))
	}
	f.post("/other", chatBody(true))
	check := func(name string, seen, matched, hits int) {
		s, m, h := f.ruleCounters(name)
		if s != seen || m != matched || h != hits {
			t.Errorf("%s: seen/matched/hits %d/%d/%d, want %d/%d/%d", name, s, m, h, seen, matched, hits)
		}
	}
	check("a-delay", 5, 4, 4)
	check("b-abort", 5, 4, 2)
	check("c-stall", 5, 3, 0) // the aborted ones end the evaluation; 3 tokens never reach 10
	lines := f.logLines(5)
	if lines[1]["rule"] != "a-delay,b-abort" || lines[0]["rule"] != "a-delay" || lines[4]["rule"] != nil {
		t.Fatalf("log rules: %v %v %v", lines[0]["rule"], lines[1]["rule"], lines[4]["rule"])
	}
}

func TestHangReleasedOnRemoval(t *testing.T) {
	f := newFixture(t, sseUpstream(3, 0))
	f.addRule(map[string]any{"name": "h", "kind": "hang"})
	done := make(chan string, 1)
	go func() {
		resp, err := f.client.Post(f.url("/v1/chat/completions"), "application/json", strings.NewReader(chatBody(true)))
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	select {
	case b := <-done:
		t.Fatalf("a hung request was answered: %q", b)
	case <-time.After(200 * time.Millisecond):
	}
	if f.upCalls.Load() != 0 || f.p.inFlight.Load() != 1 {
		t.Fatal("the held request went upstream")
	}
	code, out := f.adminCall("DELETE", "/_chaos/rules/h", nil)
	if code != 200 || out["hits"] != 1.0 {
		t.Fatalf("delete: %d %v", code, out)
	}
	select {
	case b := <-done:
		if !strings.HasSuffix(b, "data: [DONE]\n\n") {
			t.Fatalf("released request: %q", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held request was not released")
	}
	if rec := f.lastLog(); rec["outcome"] != "stop" || rec["rule"] != "h" {
		t.Fatalf("log %v", rec)
	}
}

func TestHangClientGivesUp(t *testing.T) {
	f := newFixture(t, sseUpstream(3, 0))
	f.addRule(map[string]any{"name": "h", "kind": "hang"})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", f.url("/v1/chat/completions"), strings.NewReader(chatBody(true)))
	if _, err := f.client.Do(req); err == nil {
		t.Fatal("a hung request was answered")
	}
	rec := f.lastLog()
	if rec["outcome"] != "abort" || rec["status"] != 0.0 || rec["t_headers"] != nil || rec["upstream_status"] != nil {
		t.Fatalf("log %v", rec)
	}
}
