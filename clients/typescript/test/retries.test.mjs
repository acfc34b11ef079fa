// The client's retries and error kinds against scripted answers (a fake fetch), with node's test
// runner: `npm run build && node --test test/`. memweb's suite runs this after compiling.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MemwebClient, MemwebError } from "../dist/index.js";

const json = (status, body, headers = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });

function scripted(...answers) {
  const requests = [];
  const fetch = async (url, init) => {
    requests.push({ url, init });
    const answer = answers.length > 1 ? answers.shift() : answers[0];
    if (answer instanceof Error) throw answer;
    return answer();
  };
  return { requests, client: new MemwebClient("http://memweb.test/", "key", { fetch, retry: { backoffMs: 1, maxRetries: 3 } }) };
}

const inProgress = () => json(409, { detail: "still in progress" }, { "Retry-After": "0" });
const stale = () => json(409, { detail: "Orb #4 changed", orb_id: 4, current_version: 3, current_status: "approved" });
const recorded = () => json(200, { detail: "recorded" });

test("an in-progress 409 is retried with the same Idempotency-Key until answered", async () => {
  const { client, requests } = scripted(inProgress, inProgress, recorded);
  await client.retrievalOutcome(7, { success: true });
  assert.equal(requests.length, 3);
  assert.equal(new Set(requests.map((r) => r.init.headers["Idempotency-Key"])).size, 1);
});

test("a request still in progress after every retry throws kind in_progress", async () => {
  const { client, requests } = scripted(inProgress);
  await assert.rejects(client.retrievalOutcome(7, { success: true }), (e) => e instanceof MemwebError && e.kind === "in_progress");
  assert.equal(requests.length, 4);
});

test("a stale version is its own kind and is not retried", async () => {
  const { client, requests } = scripted(stale);
  await assert.rejects(client.remember("support", { text: "Offer a label." }),
    (e) => e instanceof MemwebError && e.kind === "stale_version" && e.status === 409);
  assert.equal(requests.length, 1);
});

test("429 and 503 are retried; a 404 is not", async () => {
  const { client, requests } = scripted(() => json(429, { detail: "later" }, { "Retry-After": "0" }),
    () => json(503, { detail: "down" }), () => json(404, { detail: "No memory bank 'nope'" }));
  await assert.rejects(client.bank("nope"), (e) => e.kind === "not_found" && e.detail === "No memory bank 'nope'");
  assert.equal(requests.length, 3);
  assert.equal(requests[0].url, "http://memweb.test/api/orbs/banks/nope");
  assert.equal(requests[0].init.headers["Idempotency-Key"], undefined);
});

test("a network failure is retried, then thrown as kind connection", async () => {
  const { client, requests } = scripted(new TypeError("fetch failed"));
  await assert.rejects(client.me(), (e) => e.kind === "connection");
  assert.equal(requests.length, 4);
});
