import assert from "node:assert/strict";
import { waitFor } from "../_harness/broker.ts";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";
import type {
  ConnectionEvent,
  CotalMessageEvent,
  EndpointWarningEvent,
  RenewalEvent,
} from "../../lib/endpoint/mod.ts";
import { collect, startMesh } from "./_mesh.ts";
import { startRelay } from "./_proxy.ts";

const policy = { subscribe: ["general"], allowPublish: ["general"] };

Deno.test({
  name:
    "endpoint - creds renewed by function (20 s TTL) keep one connection through three renewals, losing nothing",
  async fn() {
    await using mesh = await startMesh();
    const alice = await mesh.agent("alice", policy);
    const bob = await mesh.agent("bob", policy);
    const minted: string[] = [];
    const a = alice.endpoint({
      creds: async () => {
        const c = await alice.mint(20);
        minted.push(c);
        return c;
      },
    });
    const b = bob.endpoint();
    const renewed = collect<RenewalEvent>(a, "renewed");
    const conn = collect<ConnectionEvent>(a, "connection");
    const atA = collect<CotalMessageEvent>(a, "message");
    const atB = collect<CotalMessageEvent>(b, "message");
    const warnings = collect<EndpointWarningEvent>(a, "warning");
    await a.start();
    await b.start();

    const toA = new Set<string>();
    const toB = new Set<string>();
    let sending = true;
    const traffic = (async () => {
      for (let i = 0; sending; i++) {
        toA.add((await b.multicast(`b${i}`)).id);
        toA.add((await b.unicast(alice.id, `dm b${i}`)).id);
        toB.add((await a.multicast(`a${i}`)).id);
        toB.add((await a.unicast(bob.id, `dm a${i}`)).id);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    await waitFor(() => renewed.length >= 3, { what: "three renewals", timeoutMs: 70_000 });
    // Keep talking a little past the third swap, so its reconnect is covered too.
    await new Promise((r) => setTimeout(r, 1_000));
    sending = false;
    await traffic;

    const has = (evs: CotalMessageEvent[], ids: Set<string>) => {
      const got = new Set(evs.map((e) => e.message.id));
      return [...ids].filter((id) => !got.has(id));
    };
    await waitFor(() => has(atA, toA).length === 0 && has(atB, toB).length === 0, {
      what: "every message sent during the renewals",
    });
    assert.ok(toA.size > 100, `traffic flowed (${toA.size} messages to alice)`);
    // Each id surfaced once.
    assert.equal(atA.length, new Set(atA.map((e) => e.message.id)).size);
    // One connection throughout: never reported down, never rebuilt.
    assert.deepEqual(conn.map((c) => c.connected), [true]);
    assert.equal(warnings.length, 0, warnings.map((w) => w.error.message).join("; "));
    assert.ok(minted.length >= 4);
    // The connection outlived the first two JWTs (the broker drops a client whose JWT expires).
    assert.ok(Date.now() > expOf(minted[1]));
    assert.equal(renewed[2].expiresAt, expOf(minted[3]));
  },
});

Deno.test("endpoint - an expiring string credential is never presented again; warning and backoff", async () => {
  await using mesh = await startMesh();
  const alice = await mesh.agent("alice", policy);
  const relay = startRelay(mesh.broker.port);
  try {
    const creds = await alice.mint(6);
    const exp = expOf(creds);
    const a = alice.endpoint({ servers: relay.url, creds });
    const warnings = collect<EndpointWarningEvent>(a, "warning");
    const conn = collect<ConnectionEvent>(a, "connection");
    await a.start();
    assert.equal(relay.connects.length, 1);
    // The broker drops the connection at expiry; the endpoint must not answer with the dead JWT.
    await waitFor(() => warnings.length >= 3, {
      what: "three backoff warnings",
      timeoutMs: 30_000,
    });
    assert.deepEqual(conn.map((c) => c.connected), [true, false]);
    assert.ok(
      warnings.every((w) => w.error.code === "creds_expired"),
      warnings.map((w) => w.error.code).join(),
    );
    assert.match(warnings[0].error.message, /string creds expired .* cannot be renewed/);
    assert.deepEqual(warnings.slice(0, 3).map((w) => w.retryInMs), [3_000, 6_000, 12_000]);
    // Only the first CONNECT carried credentials, and only while they were alive.
    assert.equal(relay.connects.length, 1);
    assert.ok(relay.connects.every((c) => c.at < exp));
    await assert.rejects(() => a.multicast("hi"), /reconnecting/);
    await a.stop();
  } finally {
    await relay.close();
  }
});

function expOf(creds: string): number {
  return decodeJwtUnverified(/BEGIN NATS USER JWT-+\n(\S+)\n/.exec(creds)![1]).exp! * 1000;
}
