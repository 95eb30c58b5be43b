#!/bin/sh
# A BAD client on purpose: retries every 100 ms, up to 10 times, whatever the error (even a 400).
# Usage: naive_retry.sh BASE_URL     (backoff-check must fail it on min_interval, exponential, ...)
url="$1/v1/chat/completions"
body='{"model":"sim-model","messages":[{"role":"user","content":"hi"}],"max_tokens":8}'
i=0
while [ "$i" -lt 10 ]; do
  i=$((i + 1))
  code=$(curl -s -o /dev/null -w '%{http_code}' -m 2 -H 'Content-Type: application/json' \
         -H 'x-request-id: naive-1' -d "$body" "$url")
  [ "$code" = "200" ] && exit 0
  sleep 0.1
done
exit 1
