package main

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAbort(t *testing.T) {
	f := newFixture(t, sseUpstream(3, 0))
	f.addRule(map[string]any{"name": "ab", "kind": "abort", "status": 429, "retry_after": "2"})
	resp, b := f.post("/v1/chat/completions", chatBody(true))
	want := `{"error": {"message": "Injected error (fault proxy rule ab).", "type": "RateLimitError", "param": null, "code": 429}}`
	if resp.StatusCode != 429 || string(b) != want || resp.Header.Get("Retry-After") != "2" ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if f.upCalls.Load() != 0 {
		t.Fatal("an aborted request went upstream")
	}
	rec := f.lastLog()
	if rec["outcome"] != "rejected" || rec["status"] != 429.0 || rec["rule"] != "ab" || rec["upstream_status"] != nil {
		t.Fatalf("log %v", rec)
	}
	f.addRule(map[string]any{"name": "ab", "kind": "abort", "message": "nope"})
	resp, b = f.post("/v1/chat/completions", chatBody(true))
	if resp.StatusCode != 503 || !strings.Contains(string(b), `"message": "nope", "type": "ServiceUnavailableError"`) ||
		resp.Header.Get("Retry-After") != "" {
		t.Fatalf("got %d %s", resp.StatusCode, b)
	}
	if rec := f.lastLog(); rec["outcome"] != "error" {
		t.Fatalf("a 503 logged %v", rec["outcome"])
	}
}

func TestAbortBusy529(t *testing.T) {
	f := newFixture(t, sseUpstream(3, 0))
	f.addRule(map[string]any{"name": "busy", "kind": "abort", "status": 529, "message": "busy"})
	resp, b := f.post("/v1/chat/completions", chatBody(true))
	want := `{"error": {"message": "busy", "type": "Overloaded", "param": null, "code": 529}}`
	if resp.StatusCode != 529 || string(b) != want || resp.Header.Get("Retry-After") != "" ||
		resp.Header.Get("Content-Type") != "application/json" || f.upCalls.Load() != 0 {
		t.Fatalf("got %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if rec := f.lastLog(); rec["outcome"] != "error" || rec["status"] != 529.0 || rec["rule"] != "busy" {
		t.Fatalf("log %v", rec)
	}
	f.addRule(map[string]any{"name": "busy", "kind": "abort", "status": 529, "retry_after": "1"})
	resp, b = f.post("/v1/chat/completions", chatBody(false))
	if resp.StatusCode != 529 || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(b), `"type": "Overloaded", "param": null, "code": 529}}`) {
		t.Fatalf("got %d %v %s", resp.StatusCode, resp.Header, b)
	}
}

func TestOOM(t *testing.T) {
	f := newFixture(t, sseUpstream(3, 0))
	f.addRule(map[string]any{"name": "o", "kind": "oom"})
	resp, b := f.post("/v1/chat/completions", chatBody(false))
	want := `{"error": {"message": "` + oomMessage + `", "type": "InternalServerError", "param": null, "code": 500}}`
	if resp.StatusCode != 500 || string(b) != want || f.upCalls.Load() != 0 {
		t.Fatalf("got %d %s", resp.StatusCode, b)
	}
	if !strings.Contains(oomMessage, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB of which 1.06 GiB is free. Process has 78.19 GiB memory in use.") {
		t.Fatal("oom message changed")
	}
}

func TestDelay(t *testing.T) {
	f := newFixture(t, sseUpstream(3, 0))
	f.addRule(map[string]any{"name": "d", "kind": "delay", "headers_s": 0.15})
	t0 := time.Now()
	resp, _ := f.post("/v1/chat/completions", chatBody(true))
	if el := time.Since(t0); resp.StatusCode != 200 || el < 150*time.Millisecond {
		t.Fatalf("headers delay: %v", el)
	}
	f.adminCall("DELETE", "/_chaos/rules/d", nil)
	f.addRule(map[string]any{"name": "d2", "kind": "delay", "first_token_s": 0.15})
	resp, err := f.client.Post(f.url("/v1/chat/completions"), "application/json", strings.NewReader(chatBody(true)))
	if err != nil {
		t.Fatal(err)
	}
	tHeaders := time.Now()
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if el := time.Since(tHeaders); el < 150*time.Millisecond || tokenCount(sseData(b)) != 3 {
		t.Fatalf("first-token delay: %v %q", el, b)
	}
	rec := f.lastLog()
	ft, th := rec["t_first_token"].(float64), rec["t_headers"].(float64)
	if ft-th < 0.15 || rec["rule"] != "d2" {
		t.Fatalf("log %v", rec)
	}
}

// readEvents reads a stream event by event, noting when each arrived.
func readEvents(t *testing.T, r io.Reader) (events []string, at []time.Time, err error) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, "data: ") {
			events = append(events, strings.TrimSpace(strings.TrimPrefix(line, "data: ")))
			at = append(at, time.Now())
		}
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return events, at, err
		}
	}
}

func streamOf(t *testing.T, f *fixture) ([]string, []time.Time, error) {
	t.Helper()
	resp, err := f.client.Post(f.url("/v1/chat/completions"), "application/json", strings.NewReader(chatBody(true)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return readEvents(t, resp.Body)
}

func TestStall(t *testing.T) {
	f := newFixture(t, sseUpstream(5, 0))
	f.addRule(map[string]any{"name": "s", "kind": "stall", "after_tokens": 2, "seconds": 0.2})
	sent := time.Now()
	ev, at, err := streamOf(t, f)
	if err != nil || len(ev) != 7 || ev[6] != "[DONE]" {
		t.Fatalf("%v %v", err, ev)
	}
	// The client's read times carry its own scheduling delay, which need not cancel between two events (a t2 read
	// late shortens the gap after it): judge the stall where that delay cannot hide it. Token 3 cannot arrive
	// sooner than the stall after the request went out; the longest gap is the one before it (role, t1, t2 |
	// stall | t3); and the proxy's own log has the stall between its first token and its end.
	if d := at[3].Sub(sent); d < 200*time.Millisecond {
		t.Fatalf("token 3 after %v: no stall", d)
	}
	longest := 1
	for i := 2; i < len(at); i++ {
		if at[i].Sub(at[i-1]) > at[longest].Sub(at[longest-1]) {
			longest = i
		}
	}
	if longest != 3 {
		t.Fatalf("the longest gap is before event %d, not after 2 tokens: %v", longest, at)
	}
	if rec := f.lastLog(); rec["t_finish"].(float64)-rec["t_first_token"].(float64) < 0.2 {
		t.Fatalf("the proxy's log has no stall after its first token: %v", rec)
	}
	if _, _, hits := f.ruleCounters("s"); hits != 1 {
		t.Fatalf("hits %d", hits)
	}
}

func TestCut(t *testing.T) {
	f := newFixture(t, sseUpstream(6, 0))
	f.addRule(map[string]any{"name": "c", "kind": "cut", "after_tokens": 3})
	ev, _, err := streamOf(t, f)
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the client saw a clean end: %v %v", err, ev)
	}
	if tokenCount(ev) != 3 {
		t.Fatalf("tokens before the cut: %v", ev)
	}
	rec := f.lastLog()
	if rec["outcome"] != "error" || rec["output_tokens"] != 3.0 || rec["status"] != 200.0 || rec["rule"] != "c" {
		t.Fatalf("log %v", rec)
	}
	f.addRule(map[string]any{"name": "c", "kind": "cut", "after_tokens": 2, "done": true})
	ev, _, err = streamOf(t, f)
	if err != nil || tokenCount(ev) != 2 || ev[len(ev)-1] != "[DONE]" || strings.Contains(strings.Join(ev, ""), "finish_reason\":\"") {
		t.Fatalf("cut with done: %v %v", err, ev)
	}
	if rec := f.lastLog(); rec["outcome"] != "error" {
		t.Fatalf("log %v", rec)
	}
	f.addRule(map[string]any{"name": "c", "kind": "cut", "after_tokens": 7}) // never reached
	if ev, _, err = streamOf(t, f); err != nil || tokenCount(ev) != 6 {
		t.Fatal("a cut past the end of the stream applied")
	}
	if _, _, hits := f.ruleCounters("c"); hits != 0 {
		t.Fatalf("hits %d for a token never reached", hits)
	}
}

func TestErrorChunk(t *testing.T) {
	f := newFixture(t, sseUpstream(5, 0))
	f.addRule(map[string]any{"name": "e", "kind": "error_chunk", "after_tokens": 2})
	ev, _, err := streamOf(t, f)
	want := `{"error": {"message": "EngineCore encountered an issue. See stack trace (above) for the root cause.", "type": "InternalServerError", "param": null, "code": 500}}`
	if err != nil || tokenCount(ev) != 2 || len(ev) != 5 || ev[3] != want || ev[4] != "[DONE]" {
		t.Fatalf("%v %q", err, ev)
	}
	if rec := f.lastLog(); rec["outcome"] != "error" || rec["status"] != 200.0 || rec["output_tokens"] != 2.0 {
		t.Fatalf("log %v", rec)
	}
}

func TestMalformedAndDuplicate(t *testing.T) {
	f := newFixture(t, sseUpstream(4, 0))
	f.addRule(map[string]any{"name": "m", "kind": "malformed_chunk", "after_tokens": 1})
	ev, _, err := streamOf(t, f)
	if err != nil || len(ev) != 7 || ev[2] != `{"choices": [{"delta": {"cont` || tokenCount(ev) != 4 {
		t.Fatalf("malformed: %v %q", err, ev)
	}
	f.adminCall("DELETE", "/_chaos/rules", nil)
	f.addRule(map[string]any{"name": "d", "kind": "duplicate_chunk", "after_tokens": 2})
	ev, _, err = streamOf(t, f)
	if err != nil || len(ev) != 7 || ev[3] != ev[4] || !strings.Contains(ev[3], `"t3"`) {
		t.Fatalf("duplicate: %v %q", err, ev)
	}
	if rec := f.lastLog(); rec["output_tokens"] != 5.0 || rec["rule"] != "d" {
		t.Fatalf("log %v", rec)
	}
}

func TestRewriteModelAndHeader(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(readAll(r), `"stream": true`) {
			sseUpstream(2, 0)(w, r)
			return
		}
		w.Header().Set("X-Drop-Me", "1")
		jsonUpstream(200, chatJSON)(w, r)
	})
	f.addRule(map[string]any{"name": "rw", "kind": "rewrite_model", "model": "other \"model\""})
	f.addRule(map[string]any{"name": "h", "kind": "header", "drop": []string{"x-drop-me", "date"},
		"set": map[string]string{"X-Set": "v"}})
	ev, _, err := streamOf(t, f)
	joined := strings.Join(ev, "\n")
	if err != nil || strings.Contains(joined, `"sim-model"`) || strings.Count(joined, `"model":"other \"model\""`) != 3 {
		t.Fatalf("stream rewrite: %v %q", err, ev)
	}
	resp, b := f.post("/v1/chat/completions", chatBody(false))
	if !strings.Contains(string(b), `"model": "other \"model\""`) || strings.Contains(string(b), "sim-model") {
		t.Fatalf("JSON rewrite: %s", b)
	}
	if resp.Header.Get("X-Drop-Me") != "" || resp.Header.Get("Date") != "" || resp.Header.Get("X-Set") != "v" ||
		resp.ContentLength != int64(len(b)) {
		t.Fatalf("headers %v", resp.Header)
	}
	if rec := f.lastLog(); rec["rule"] != "rw,h" {
		t.Fatalf("log rule %v", rec["rule"])
	}
}

func readAll(r *http.Request) string {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(b)))
	return string(b)
}

// The stream kinds on a JSON answer act on the body.
func TestStreamKindsOnJSON(t *testing.T) {
	f := newFixture(t, jsonUpstream(200, chatJSON))
	f.addRule(map[string]any{"name": "k", "kind": "error_chunk"})
	resp, b := f.post("/v1/chat/completions", chatBody(false))
	if resp.StatusCode != 500 || !strings.Contains(string(b), "EngineCore encountered an issue") {
		t.Fatalf("error_chunk: %d %s", resp.StatusCode, b)
	}
	f.addRule(map[string]any{"name": "k", "kind": "malformed_chunk"})
	resp, b = f.post("/v1/chat/completions", chatBody(false))
	if resp.StatusCode != 200 || string(b) != chatJSON[:len(chatJSON)/2] {
		t.Fatalf("malformed: %d %s", resp.StatusCode, b)
	}
	f.addRule(map[string]any{"name": "k", "kind": "duplicate_chunk"})
	if _, b = f.post("/v1/chat/completions", chatBody(false)); string(b) != chatJSON {
		t.Fatalf("duplicate changed a JSON answer: %s", b)
	}
	if _, _, hits := f.ruleCounters("k"); hits != 0 {
		t.Fatal("duplicate_chunk counted a hit on a JSON answer")
	}
	f.addRule(map[string]any{"name": "k", "kind": "stall", "seconds": 0.15})
	t0 := time.Now()
	if _, b = f.post("/v1/chat/completions", chatBody(false)); string(b) != chatJSON || time.Since(t0) < 150*time.Millisecond {
		t.Fatal("stall on a JSON answer")
	}
	f.addRule(map[string]any{"name": "k", "kind": "cut"})
	resp, err := f.client.Post(f.url("/v1/chat/completions"), "application/json", strings.NewReader(chatBody(false)))
	if err != nil {
		t.Fatal(err)
	}
	b, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err == nil || len(b) != 0 {
		t.Fatalf("cut on a JSON answer: %v %q", err, b)
	}
	if rec := f.lastLog(); rec["outcome"] != "error" {
		t.Fatalf("log %v", rec)
	}
}

func TestCorruptAnswer(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(readAll(r), `"stream": true`) {
			sseUpstream(3, 0)(w, r)
			return
		}
		jsonUpstream(200, chatJSON)(w, r)
	})
	f.addRule(map[string]any{"name": "c", "kind": "corrupt_answer", "after_tokens": 1, "insert": `x"y `})
	ev, _, err := streamOf(t, f)
	if err != nil || len(ev) != 5 || !strings.Contains(ev[1], `"content":"t1"`) ||
		!strings.Contains(ev[2], `"content":"x\"y t2"`) || !strings.Contains(ev[3], `"content":"t3"`) {
		t.Fatalf("stream: %v %q", err, ev)
	}
	if rec := f.lastLog(); rec["rule"] != "c" || rec["outcome"] != "stop" || rec["output_tokens"] != 3.0 {
		t.Fatalf("log %v", rec)
	}
	f.addRule(map[string]any{"name": "c", "kind": "corrupt_answer"})
	resp, b := f.post("/v1/chat/completions", chatBody(false))
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"content": "corrupted t1 t2 t3"`) ||
		resp.ContentLength != int64(len(b)) {
		t.Fatalf("JSON: %d %s", resp.StatusCode, b)
	}
	f.addRule(map[string]any{"name": "c", "kind": "corrupt_answer", "fraction": 0.5})
	changed := 0
	for i := 0; i < 4; i++ {
		if _, b = f.post("/v1/chat/completions", chatBody(false)); strings.Contains(string(b), "corrupted") {
			changed++
		}
	}
	if _, _, hits := f.ruleCounters("c"); changed != 2 || hits != 2 {
		t.Fatalf("fraction 0.5 of 4: %d changed, %d hits", changed, hits)
	}
	if code, body := f.adminCall("POST", "/_chaos/rules", map[string]any{"name": "e", "kind": "corrupt_answer",
		"insert": ""}); code != 400 || !strings.Contains(body["error"].(string), "rule.insert") {
		t.Fatalf("empty insert: %d %v", code, body)
	}
}
