package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

var commonFields = []string{"name", "kind", "fraction", "spread", "seed", "limit", "match"}

var kindFields = map[string][]string{
	kAbort: {"status", "retry_after", "message"}, kOOM: {}, kDelay: {"headers_s", "first_token_s"},
	kStall: {"after_tokens", "seconds"}, kCut: {"after_tokens", "done"},
	kErrChunk: {"after_tokens", "message", "code"}, kMalformed: {"after_tokens"},
	kDuplicate: {"after_tokens"}, kRewrite: {"model"}, kHeader: {"drop", "set"}, kHang: {},
	kCorrupt: {"after_tokens", "insert"},
}

func bad(field, format string, args ...any) error {
	return fmt.Errorf("rule.%s: "+format, append([]any{field}, args...)...)
}

// shown is a raw JSON value as an error message quotes it.
func shown(raw json.RawMessage) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

type fieldSet map[string]json.RawMessage

// get returns a field's raw value; a null counts as absent (the default applies).
func (f fieldSet) get(k string) (json.RawMessage, bool) {
	raw, ok := f[k]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

func asNumber(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || !(raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	return v, err == nil
}

func asInt(raw json.RawMessage) (int64, bool) {
	if v, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return v, true
	}
	return 0, false
}

func asString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func (f fieldSet) number(k string, def float64, ok func(float64) bool, want string) (*float64, error) {
	raw, present := f.get(k)
	if !present {
		return &def, nil
	}
	v, isNum := asNumber(raw)
	if !isNum || !ok(v) {
		return nil, bad(k, "expected %s, got %s", want, shown(raw))
	}
	return &v, nil
}

func (f fieldSet) integer(k string, def, lo, hi int64, want string) (*int, error) {
	raw, present := f.get(k)
	if !present {
		d := int(def)
		return &d, nil
	}
	v, isInt := asInt(raw)
	if !isInt || v < lo || v > hi {
		return nil, bad(k, "expected %s, got %s", want, shown(raw))
	}
	n := int(v)
	return &n, nil
}

func (f fieldSet) str(k string, def *string) (*string, error) {
	raw, present := f.get(k)
	if !present {
		return def, nil
	}
	s, ok := asString(raw)
	if !ok {
		return nil, bad(k, "expected a string, got %s", shown(raw))
	}
	return &s, nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' ||
			c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func validHeaderValue(s string) bool {
	return !strings.ContainsAny(s, "\r\n\x00")
}

// parseRule validates one rule from the admin API and fills in its kind's defaults.
func parseRule(body []byte) (ruleSpec, error) {
	var spec ruleSpec
	var f fieldSet
	if err := json.Unmarshal(body, &f); err != nil || f == nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || (err != nil && !strings.Contains(err.Error(), "cannot unmarshal")) {
			return spec, fmt.Errorf("rule: invalid JSON: %v", err)
		}
		return spec, errors.New("rule: expected a JSON object")
	}
	raw, ok := f.get("name")
	if !ok {
		return spec, bad("name", "required")
	}
	if spec.Name, ok = asString(raw); !ok || !validName(spec.Name) {
		return spec, bad("name", "expected a string matching [A-Za-z0-9._-]{1,64}, got %s", shown(raw))
	}
	kinds := strings.Join(kindNames, ", ")
	if raw, ok = f.get("kind"); !ok {
		return spec, bad("kind", "required (one of %s)", kinds)
	}
	own, known := kindFields[strings.Trim(string(raw), `"`)]
	if spec.Kind, ok = asString(raw); !ok || !known {
		return spec, bad("kind", "expected one of %s, got %s", kinds, shown(raw))
	}
	allowed := append(append([]string{}, commonFields...), own...)
	var unknown []string
	for k := range f {
		if !contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return spec, bad(unknown[0], "unknown field for kind %s (it takes %s)", spec.Kind,
			strings.Join(allowed, ", "))
	}
	fr, err := f.number("fraction", 1, func(v float64) bool { return v >= 0 && v <= 1 }, "a number in [0, 1]")
	if err != nil {
		return spec, err
	}
	spec.Fraction = *fr
	spec.Spread = "even"
	if raw, ok = f.get("spread"); ok {
		if s, _ := asString(raw); s != "even" && s != "random" {
			return spec, bad("spread", `expected "even" or "random", got %s`, shown(raw))
		}
		spec.Spread, _ = asString(raw)
	}
	if raw, ok = f.get("seed"); ok {
		if spec.Seed, ok = asInt(raw); !ok {
			return spec, bad("seed", "expected an integer, got %s", shown(raw))
		}
	}
	if raw, ok = f.get("limit"); ok {
		n, isInt := asInt(raw)
		if !isInt || n < 1 {
			return spec, bad("limit", "expected an integer >= 1, got %s", shown(raw))
		}
		spec.Limit = &n
	}
	if spec.Match, err = parseMatch(f); err != nil {
		return spec, err
	}
	return spec, parseKind(f, &spec)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
