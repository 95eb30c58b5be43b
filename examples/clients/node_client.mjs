#!/usr/bin/env node
// A good client in another language (Node 18+, no packages): one chat request with backoff.
// Floor 500 ms, exponential, additive jitter, cap, deadline, Retry-After honoured above the floor,
// no retry on 400/401/403/404/422, one x-request-id across attempts.
// Usage: node node_client.mjs BASE_URL [--min 0.5] [--max 8] [--mult 2] [--jitter 0.2] [--attempts 5]
//        [--deadline 60] [--timeout 10]
import { randomUUID } from "node:crypto";

const args = process.argv.slice(2);
const base = args[0];
const opt = (name, dflt) => { const i = args.indexOf(`--${name}`); return i > 0 ? Number(args[i + 1]) : dflt; };
const p = { min: opt("min", 0.5), max: opt("max", 8), mult: opt("mult", 2), jitter: opt("jitter", 0.2),
            attempts: opt("attempts", 5), deadline: opt("deadline", 60), timeout: opt("timeout", 10) };
const NON_RETRYABLE = new Set([400, 401, 403, 404, 422]);
const sleep = (s) => new Promise((r) => setTimeout(r, s * 1000));

function waitFor(attempt, retryAfter) {
  let w = Math.min(p.max, p.min * p.mult ** (attempt - 1)) * (1 + p.jitter * Math.random());
  w = Math.min(w, p.max);
  if (retryAfter !== null && !Number.isNaN(retryAfter)) w = Math.max(w, retryAfter);
  return Math.max(w, p.min);
}

async function main() {
  const id = randomUUID();
  const start = Date.now() / 1000;
  const body = JSON.stringify({ model: "sim-model", messages: [{ role: "user", content: "hi" }], max_tokens: 8 });
  for (let attempt = 1; ; attempt++) {
    let status = null, retryAfter = null;
    try {
      const r = await fetch(`${base}/v1/chat/completions`, {
        method: "POST", body, signal: AbortSignal.timeout(p.timeout * 1000),
        headers: { "Content-Type": "application/json", "x-request-id": id },
      });
      status = r.status;
      retryAfter = r.headers.get("retry-after") === null ? null : Number(r.headers.get("retry-after"));
      const text = await r.text();
      if (status === 200 && text.length > 0) { console.log(`ok after ${attempt} attempt(s)`); return 0; }
    } catch (e) { status = null; }
    if (status !== null && NON_RETRYABLE.has(status)) { console.log(`rejected: ${status}`); return 1; }
    const wait = waitFor(attempt, retryAfter);
    if (attempt >= p.attempts || Date.now() / 1000 - start + wait > p.deadline) {
      console.log(`gave up after ${attempt} attempt(s)`); return 1;
    }
    await sleep(wait);
  }
}
process.exit(await main());
