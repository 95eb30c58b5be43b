package main

import (
	"strings"
	"testing"
)

func TestAdminAuth(t *testing.T) {
	f := newFixture(t, jsonUpstream(200, chatJSON))
	for _, auth := range []string{"", "Bearer wrong", "s3cret", "Basic s3cret"} {
		for _, c := range [][2]string{{"GET", "/_chaos/rules"}, {"POST", "/_chaos/rules"},
			{"DELETE", "/_chaos/rules/x"}, {"DELETE", "/_chaos/rules"}, {"GET", "/_chaos/nothing"}} {
			code, out := f.adminRaw(c[0], c[1], map[string]any{"name": "x", "kind": "oom"}, auth)
			if code != 401 || out["error"] == nil {
				t.Errorf("%s %s with %q: %d %v", c[0], c[1], auth, code, out)
			}
		}
	}
	code, out := f.adminRaw("GET", "/_chaos/health", nil, "")
	if code != 200 || out["name"] != "replica-t" || out["upstream"] != f.up.URL || out["rules"] != 0.0 ||
		out["requests"] != 0.0 || out["in_flight"] != 0.0 {
		t.Fatalf("health: %d %v", code, out)
	}
	if len(f.p.rules.load()) != 0 {
		t.Fatal("an unauthorized call changed the rules")
	}
}

func TestAdminBadInput(t *testing.T) {
	f := newFixture(t, jsonUpstream(200, chatJSON))
	cases := []struct {
		body  any
		field string
	}{
		{map[string]any{"name": "x", "kind": "explode"}, "rule.kind:"},
		{map[string]any{"name": "x"}, "rule.kind:"},
		{map[string]any{"kind": "oom"}, "rule.name:"},
		{map[string]any{"name": "bad name!", "kind": "oom"}, "rule.name:"},
		{map[string]any{"name": strings.Repeat("a", 65), "kind": "oom"}, "rule.name:"},
		{map[string]any{"name": 7, "kind": "oom"}, "rule.name:"},
		{map[string]any{"name": "x", "kind": "oom", "fraction": 1.5}, "rule.fraction: expected a number in [0, 1], got 1.5"},
		{map[string]any{"name": "x", "kind": "oom", "fraction": "half"}, "rule.fraction:"},
		{map[string]any{"name": "x", "kind": "cut", "after_tokens": -1}, "rule.after_tokens:"},
		{map[string]any{"name": "x", "kind": "cut", "after_tokens": 1.5}, "rule.after_tokens:"},
		{map[string]any{"name": "x", "kind": "cut", "done": "yes"}, "rule.done:"},
		{map[string]any{"name": "x", "kind": "oom", "colour": "red"}, "rule.colour:"},
		{map[string]any{"name": "x", "kind": "oom", "status": 500}, "rule.status:"},
		{map[string]any{"name": "x", "kind": "abort", "status": 200}, "rule.status:"},
		{map[string]any{"name": "x", "kind": "abort", "retry_after": 2}, "rule.retry_after:"},
		{map[string]any{"name": "x", "kind": "oom", "spread": "lumpy"}, "rule.spread:"},
		{map[string]any{"name": "x", "kind": "oom", "seed": 1.5}, "rule.seed:"},
		{map[string]any{"name": "x", "kind": "oom", "limit": 0}, "rule.limit: expected an integer >= 1, got 0"},
		{map[string]any{"name": "x", "kind": "oom", "limit": 2.5}, "rule.limit:"},
		{map[string]any{"name": "x", "kind": "oom", "match": "all"}, "rule.match:"},
		{map[string]any{"name": "x", "kind": "oom", "match": map[string]any{"route": "/"}}, "rule.match.route:"},
		{map[string]any{"name": "x", "kind": "oom", "match": map[string]any{"path": 3}}, "rule.match.path:"},
		{map[string]any{"name": "x", "kind": "oom", "match": map[string]any{"header": map[string]any{"x-a": 1}}}, "rule.match.header.x-a:"},
		{map[string]any{"name": "x", "kind": "delay"}, "rule.headers_s:"},
		{map[string]any{"name": "x", "kind": "delay", "first_token_s": -1}, "rule.first_token_s:"},
		{map[string]any{"name": "x", "kind": "stall", "seconds": 0}, "rule.seconds:"},
		{map[string]any{"name": "x", "kind": "rewrite_model"}, "rule.model:"},
		{map[string]any{"name": "x", "kind": "header"}, "rule.drop:"},
		{map[string]any{"name": "x", "kind": "header", "drop": "x-a"}, "rule.drop:"},
		{map[string]any{"name": "x", "kind": "header", "set": map[string]any{"x-a": "a\nb"}}, "rule.set.x-a:"},
		{map[string]any{"name": "x", "kind": "error_chunk", "code": "500"}, "rule.code:"},
		{`{"name": "x", "kind": `, "rule: invalid JSON"},
		{`not json`, "rule: invalid JSON"},
		{`[1, 2]`, "rule: expected a JSON object"},
		{`null`, "rule: expected a JSON object"},
	}
	for _, c := range cases {
		code, out := f.adminCall("POST", "/_chaos/rules", c.body)
		msg, _ := out["error"].(string)
		if code != 400 || !strings.HasPrefix(msg, c.field) || len(out) != 1 {
			t.Errorf("%v: %d %v, want 400 naming %q", c.body, code, out, c.field)
		}
	}
	if len(f.p.rules.load()) != 0 {
		t.Fatal("a bad rule was installed")
	}
	if resp, b := f.post("/v1/chat/completions", chatBody(false)); resp.StatusCode != 200 || string(b) != chatJSON {
		t.Fatal("the proxy stopped serving after bad admin input")
	}
}

func TestAdminRuleLifecycle(t *testing.T) {
	f := newFixture(t, jsonUpstream(200, chatJSON))
	out := f.addRule(map[string]any{"name": "chaos-1", "kind": "abort", "fraction": 0.5, "seed": 3,
		"match": map[string]any{"path": "/v1/*"}})
	if out["status"] != 503.0 || out["spread"] != "even" || out["message"] != "Injected error (fault proxy rule chaos-1)." ||
		out["seen"] != 0.0 || out["hits"] != 0.0 || out["created"].(float64) < 1e9 {
		t.Fatalf("created rule %v", out)
	}
	f.addRule(map[string]any{"name": "chaos-2", "kind": "cut", "fraction": 0})
	f.addRule(map[string]any{"name": "other", "kind": "header", "set": map[string]string{"x-a": "1"}})
	for i := 0; i < 4; i++ {
		f.post("/v1/chat/completions", chatBody(false))
	}
	code, list := f.adminCall("GET", "/_chaos/rules", nil)
	rules := list["rules"].([]any)
	if code != 200 || len(rules) != 3 || rules[0].(map[string]any)["name"] != "chaos-1" ||
		rules[2].(map[string]any)["name"] != "other" {
		t.Fatalf("list: %v", list)
	}
	if r := rules[1].(map[string]any); r["after_tokens"] != 4.0 || r["done"] != false {
		t.Fatalf("defaults not shown: %v", r)
	}
	code, del := f.adminCall("DELETE", "/_chaos/rules/chaos-1", nil)
	if code != 200 || del["name"] != "chaos-1" || del["seen"] != 4.0 || del["matched"] != 4.0 || del["hits"] != 2.0 {
		t.Fatalf("delete: %d %v", code, del)
	}
	if code, out := f.adminCall("DELETE", "/_chaos/rules/chaos-1", nil); code != 404 || !strings.Contains(out["error"].(string), "chaos-1") {
		t.Fatalf("second delete: %d %v", code, out)
	}
	// same name: replaced, counters reset
	f.post("/v1/chat/completions", chatBody(false))
	if seen, _, _ := f.ruleCounters("other"); seen != 5 {
		t.Fatalf("seen %d", seen)
	}
	f.addRule(map[string]any{"name": "other", "kind": "oom", "fraction": 0})
	if seen, _, _ := f.ruleCounters("other"); seen != 0 || len(f.p.rules.load()) != 2 {
		t.Fatal("replacing a rule did not reset it")
	}
	f.addRule(map[string]any{"name": "chaos-3", "kind": "oom", "fraction": 0})
	code, rm := f.adminCall("DELETE", "/_chaos/rules?prefix=chaos-", nil)
	if code != 200 || strings.Join(toStrings(rm["removed"]), ",") != "chaos-2,chaos-3" {
		t.Fatalf("prefix delete: %v", rm)
	}
	f.addRule(map[string]any{"name": "z", "kind": "oom", "fraction": 0})
	if _, rm = f.adminCall("DELETE", "/_chaos/rules", nil); strings.Join(toStrings(rm["removed"]), ",") != "other,z" {
		t.Fatalf("delete all: %v", rm)
	}
	if _, h := f.adminCall("GET", "/_chaos/health", nil); h["rules"] != 0.0 || h["requests"] != 5.0 {
		t.Fatalf("health %v", h)
	}
	if code, _ := f.adminCall("PUT", "/_chaos/rules", nil); code != 405 {
		t.Fatalf("PUT: %d", code)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}
