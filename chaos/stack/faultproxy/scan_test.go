package main

import "testing"

func TestScanRequestReadsModelStreamAndContinuation(t *testing.T) {
	m, has, stream, resumed, ok := scanRequest([]byte(`{"model": "m", "stream": true, "continue_final_message": true}`))
	if !ok || !has || m != "m" || !stream || !resumed {
		t.Fatalf("got %q %v %v %v %v", m, has, stream, resumed, ok)
	}
	if _, _, _, resumed, ok := scanRequest([]byte(`{"model":"m"}`)); !ok || resumed {
		t.Fatalf("a plain request is not a continuation")
	}
	if _, _, _, _, ok := scanRequest([]byte(`not json`)); ok {
		t.Fatalf("not JSON must not be ok")
	}
}
