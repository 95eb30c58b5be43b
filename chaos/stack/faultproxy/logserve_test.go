package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
)

func (f *fixture) logPage(query string) (int, map[string]any) {
	f.t.Helper()
	return f.adminCall("GET", "/_chaos/log"+query, nil)
}

func pageLines(out map[string]any) []string {
	var got []string
	for _, l := range out["lines"].([]any) {
		got = append(got, l.(string))
	}
	return got
}

func TestLogPagesThroughEveryLine(t *testing.T) {
	f := newFixture(t, jsonUpstream(200, chatJSON))
	for i := 0; i < 7; i++ {
		f.post("/v1/chat/completions", chatBody(false), "x-request-id", fmt.Sprintf("req-%d", i))
	}
	f.logLines(7)
	var ids []string
	cursor, pages := 0.0, 0
	for {
		code, out := f.logPage(fmt.Sprintf("?cursor=%d&limit=3", int64(cursor)))
		if code != 200 || out["name"] != "replica-t" || out["cursor"] != cursor {
			t.Fatalf("page at %v: %d %v", cursor, code, out)
		}
		for _, l := range pageLines(out) {
			if !strings.HasPrefix(l, `{"request_id":"req-`) || strings.Contains(l, "\n") {
				t.Fatalf("line %q", l)
			}
			ids = append(ids, strings.Split(l, `"`)[3])
		}
		pages++
		cursor = out["next_cursor"].(float64)
		if out["more"] != true {
			if len(pageLines(out)) > 3 || out["size"] != cursor {
				t.Fatalf("last page %v", out)
			}
			break
		}
		if len(pageLines(out)) != 3 {
			t.Fatalf("a page with more after it holds %d lines", len(pageLines(out)))
		}
	}
	if pages != 3 || strings.Join(ids, ",") != "req-0,req-1,req-2,req-3,req-4,req-5,req-6" {
		t.Fatalf("%d pages, ids %v", pages, ids)
	}
	raw, _ := os.ReadFile(f.logPath)
	if int(cursor) != len(raw) {
		t.Fatalf("next_cursor %v, log %d bytes", cursor, len(raw))
	}
	// nothing new: an empty page at the same cursor
	if code, out := f.logPage(fmt.Sprintf("?cursor=%d", int64(cursor))); code != 200 || len(pageLines(out)) != 0 ||
		out["more"] != false || out["next_cursor"] != cursor {
		t.Fatalf("empty page: %d %v", code, out)
	}
}

func TestLogSinceFiltersOnArrival(t *testing.T) {
	f := newFixture(t, jsonUpstream(200, chatJSON))
	raw := `{"request_id":"old","t_arrival":100.5}` + "\n" + `{"request_id":"new","t_arrival":200.25}` + "\n" +
		`not json` + "\n" + `{"request_id":"nul","t_arrival":null}` + "\n" + `{"request_id":"edge","t_arrival":150}` + "\n"
	if err := os.WriteFile(f.logPath, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := f.logPage("?since=150")
	got := strings.Join(pageLines(out), "|")
	want := `{"request_id":"new","t_arrival":200.25}|not json|{"request_id":"nul","t_arrival":null}|{"request_id":"edge","t_arrival":150}`
	if code != 200 || got != want || out["next_cursor"] != float64(len(raw)) || out["more"] != false {
		t.Fatalf("since: %d %v", code, out)
	}
}

func TestLogPartialLastLineWaits(t *testing.T) {
	log := []byte("{\"a\":1}\n{\"b\":2}\n{\"c\":")
	pg, err := readLogPage(bytes.NewReader(log), int64(len(log)), 0, 10, nil)
	if err != nil || strings.Join(pg.Lines, "|") != `{"a":1}|{"b":2}` || pg.NextCursor != 16 || pg.More {
		t.Fatalf("%+v %v", pg, err)
	}
	log = append(log, "3}\n"...)
	pg, err = readLogPage(bytes.NewReader(log), int64(len(log)), 16, 10, nil)
	if err != nil || strings.Join(pg.Lines, "|") != `{"c":3}` || pg.NextCursor != int64(len(log)) {
		t.Fatalf("after the line ended: %+v %v", pg, err)
	}
	// a size snapshot taken mid-line never lets the reader see past it
	pg, _ = readLogPage(bytes.NewReader(log), 18, 0, 10, nil)
	if len(pg.Lines) != 2 || pg.NextCursor != 16 {
		t.Fatalf("snapshot: %+v", pg)
	}
}

func TestLogBadCursorAndParameters(t *testing.T) {
	f := newFixture(t, jsonUpstream(200, chatJSON))
	f.post("/v1/chat/completions", chatBody(false))
	size := len(f.logLines(1)) // one line
	raw, _ := os.ReadFile(f.logPath)
	cases := []struct {
		query, want string
		code        int
	}{
		{"?cursor=3", "cursor 3 is not at the start of a line", 400},
		{fmt.Sprintf("?cursor=%d", len(raw)+10), "is past the end of the log", 416},
		{"?cursor=-1", "log.cursor: expected a byte offset >= 0", 400},
		{"?cursor=x", "log.cursor:", 400},
		{"?limit=0", "log.limit: expected 1-10000 lines", 400},
		{"?limit=10001", "log.limit:", 400},
		{"?since=yesterday", "log.since: expected epoch seconds", 400},
		{"?since=NaN", "log.since:", 400},
		{"?from=0", `log: unknown parameter "from"`, 400},
	}
	for _, c := range cases {
		code, out := f.logPage(c.query)
		if code != c.code || !strings.Contains(out["error"].(string), c.want) {
			t.Errorf("%s: %d %v, want %d %q", c.query, code, out, c.code, c.want)
		}
	}
	if code, _ := f.adminCall("POST", "/_chaos/log", nil); code != 405 {
		t.Fatalf("POST: %d", code)
	}
	if code, out := f.logPage(""); code != 200 || len(pageLines(out)) != size {
		t.Fatalf("the proxy stopped serving its log after bad queries: %d %v", code, out)
	}
}

func TestLogNeedsTheToken(t *testing.T) {
	f := newFixture(t, jsonUpstream(200, chatJSON))
	f.post("/v1/chat/completions", chatBody(false))
	f.logLines(1)
	for _, auth := range []string{"", "Bearer wrong", "s3cret"} {
		code, out := f.adminRaw("GET", "/_chaos/log", nil, auth)
		if code != 401 || out["lines"] != nil {
			t.Errorf("with %q: %d %v", auth, code, out)
		}
	}
}

func TestLogPageCaps(t *testing.T) {
	line := `{"request_id":"` + strings.Repeat("x", 300<<10) + `","t_arrival":1}`
	log := []byte(strings.Repeat(line+"\n", 5))
	pg, err := readLogPage(bytes.NewReader(log), int64(len(log)), 0, 100, nil)
	if err != nil || len(pg.Lines) != 3 || !pg.More || pg.NextCursor != int64(3*(len(line)+1)) {
		t.Fatalf("byte cap: %d lines, more %v, next %d, %v", len(pg.Lines), pg.More, pg.NextCursor, err)
	}
	// a line over the page's cap is an error naming its cursor, never a stuck or endless page
	huge := []byte("{}\n" + strings.Repeat("y", logPageMaxBytes+5) + "\n")
	pg, err = readLogPage(bytes.NewReader(huge), int64(len(huge)), 0, 100, nil)
	if err != nil || len(pg.Lines) != 1 || !pg.More || pg.NextCursor != 3 {
		t.Fatalf("before the huge line: %+v %v", pg, err)
	}
	if _, err = readLogPage(bytes.NewReader(huge), int64(len(huge)), 3, 100, nil); err == nil ||
		!strings.Contains(err.Error(), "the line at cursor 3 is over") {
		t.Fatalf("huge line: %v", err)
	}
	// filtering reads at most logScanMaxBytes per call, then hands back a cursor to go on from
	old := `{"request_id":"o","t_arrival":1}` + "\n"
	many := []byte(strings.Repeat(old, logScanMaxBytes/len(old)+100) + `{"request_id":"n","t_arrival":9}` + "\n")
	since := 5.0
	pg, err = readLogPage(bytes.NewReader(many), int64(len(many)), 0, 100, &since)
	if err != nil || len(pg.Lines) != 0 || !pg.More || pg.NextCursor < logScanMaxBytes || pg.NextCursor >= int64(len(many)) {
		t.Fatalf("scan cap: %d lines, more %v, next %d, %v", len(pg.Lines), pg.More, pg.NextCursor, err)
	}
	pg, _ = readLogPage(bytes.NewReader(many), int64(len(many)), pg.NextCursor, 100, &since)
	if len(pg.Lines) != 1 || pg.More {
		t.Fatalf("after the scan cap: %+v", pg.Lines)
	}
}

func TestLogWithoutRequestLogIsAnError(t *testing.T) {
	up := httptest.NewServer(jsonUpstream(200, chatJSON))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	rlog, _ := openRequestLog("")
	p := &proxy{name: "nolog", upstream: u, upstreamStr: up.URL, token: testToken, transport: newTransport(), log: rlog}
	srv := httptest.NewServer(p)
	defer srv.Close()
	f := &fixture{t: t, client: srv.Client(), base: srv.URL}
	code, out := f.logPage("")
	if code != 404 || out["error"] != "no request log: this proxy was started without --request-log" || out["lines"] != nil {
		t.Fatalf("%d %v", code, out)
	}
}
