import assert from "node:assert/strict";
import { SignJWT } from "jose";
import { startTestBroker, waitFor } from "../_harness/broker.ts";
import { CotalEndpoint } from "../../lib/endpoint/mod.ts";
import { CredentialHolder } from "../../lib/endpoint/credentials.ts";
import { isCotalError } from "../../lib/errors.ts";
import { createSpaceAuth, mintCreds, newIdentity } from "../../lib/trust/mod.ts";
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
    // A message missed live during a swap arrives by the endpoint's gap fill from history,
    // which can take longer than the default wait on a loaded machine (30 s ran out in two
    // loaded runs of the whole suite).
    await waitFor(() => has(atA, toA).length === 0 && has(atB, toB).length === 0, {
      what: "every message sent during the renewals",
      timeoutMs: 60_000,
    }).catch((err) => {
      // Which ones, and what the endpoint said, so a failure on a loaded run can be read.
      const missing = [...has(atA, toA).map((id) => `to alice ${id}`), ...has(atB, toB)];
      throw new Error(
        `${err.message}: ${missing.length} missing (${missing.slice(0, 5).join(", ")}); ` +
          `warnings: ${warnings.map((w) => w.error.message).join("; ") || "none"}`,
      );
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

async function bearerKit() {
  const broker = await startTestBroker();
  const relay = startRelay(broker.port);
  const auth = await createSpaceAuth("bearer-kit");
  const sentinelCreds = await mintCreds(auth, newIdentity(), "probe");
  const key = new TextEncoder().encode("test-only bearer signing key, 32+ bytes long");
  const bearer = (ttlSec: number) =>
    new SignJWT({ act: { owner: OWNER, actor: "alice" } })
      .setProtectedHeader({ alg: "HS256" })
      .setSubject(OWNER)
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSec)
      .sign(key);
  return {
    broker,
    relay,
    sentinelCreds,
    bearer,
    async [Symbol.asyncDispose]() {
      await relay.close();
      await broker.stop();
    },
  };
}
const OWNER = "u_abcdefghijklmnopqrstuvwxyz";
const quiet = { consume: false, registerPresence: false, watchPresence: false } as const;

Deno.test("endpoint - a bearer function is refreshed ahead of expiry and presented on the swap", async () => {
  await using k = await bearerKit();
  const issued: string[] = [];
  const ep = new CotalEndpoint({
    servers: k.relay.url,
    space: "s",
    card: { name: "alice", owner: OWNER, actor: "alice" },
    sentinelCreds: k.sentinelCreds,
    // 63 s of life: the refresh is due 60 s before expiry, 3 s from now, held to 5 s at least.
    bearer: async () => {
      issued.push(await k.bearer(63));
      return issued.at(-1)!;
    },
    ...quiet,
  });
  const renewed = collect<RenewalEvent>(ep, "renewed");
  await ep.start();
  assert.equal(ep.id, `${OWNER}.alice`);
  assert.equal(k.relay.connects[0].auth_token, issued[0]);
  await waitFor(() => renewed.length === 1, { what: "the refresh", timeoutMs: 10_000 });
  assert.equal(renewed[0].credential, "bearer");
  // A preflight connect and the swapped live connection both present the new bearer, with
  // the sentinel creds alongside and the same inbox nonce as the connection name.
  const after = k.relay.connects.slice(1);
  assert.ok(after.length >= 2);
  assert.ok(after.every((c) => c.auth_token === issued[1]));
  assert.ok(k.relay.connects.every((c) => c.jwt && c.name === k.relay.connects[0].name));
  assert.match(k.relay.connects[0].name!, /^ibx[0-9a-f]{32}$/);
  await ep.stop();
});

Deno.test("endpoint - a dead string bearer is never presented; the endpoint warns and backs off", async () => {
  await using k = await bearerKit();
  const ep = new CotalEndpoint({
    servers: k.relay.url,
    space: "s",
    card: { name: "alice" },
    sentinelCreds: k.sentinelCreds,
    bearer: await k.bearer(4),
    ...quiet,
  });
  const all = collect<EndpointWarningEvent>(ep, "warning");
  // The plain broker has no space buckets; only the credential warnings matter here.
  const warnings = {
    get length() {
      return this.list().length;
    },
    list: () => all.filter((w) => w.error.code !== "bucket_missing"),
  };
  await ep.start();
  assert.equal(ep.id, `${OWNER}.alice`);
  await waitFor(() => Date.now() > (k.relay.connects[0].at + 4_000), {
    what: "the bearer's expiry",
    timeoutMs: 6_000,
  });
  // A network blip: the library reconnects, and the authenticator refuses the dead bearer.
  k.relay.dropAll();
  await waitFor(() => warnings.length >= 2, { what: "two backoff warnings", timeoutMs: 15_000 });
  const seen = warnings.list();
  assert.ok(
    seen.every((w) => w.error.code === "bearer_expired"),
    seen.map((w) => w.error.code).join(),
  );
  assert.match(seen[0].error.message, /string bearer expired/);
  assert.deepEqual(seen.slice(0, 2).map((w) => w.retryInMs), [3_000, 6_000]);
  assert.equal(k.relay.connects.length, 1, "no CONNECT carried the dead bearer");
  assert.ok(k.relay.accepted >= 2, "the library did dial, then declined to present it");
  await ep.stop();
});

Deno.test("endpoint - option refusals", async () => {
  const sentinelCreds = "x";
  assert.throws(() => new CotalEndpoint({ space: "", card: { name: "a" } }), /space/);
  assert.throws(
    () => new CotalEndpoint({ space: "s", card: { name: " a" } }),
    (e) => isCotalError(e, "invalid_card"),
  );
  assert.throws(
    () => new CotalEndpoint({ space: "s", card: { name: "a/b" } }),
    (e) => isCotalError(e, "invalid_card"),
  );
  assert.throws(
    () =>
      new CotalEndpoint({
        space: "s",
        card: { name: "a" },
        creds: "c",
        bearer: "b",
        sentinelCreds,
      }),
    (e) => isCotalError(e, "conflicting_credentials"),
  );
  assert.throws(
    () => new CotalEndpoint({ space: "s", card: { name: "a" }, bearer: "b" }),
    (e) => isCotalError(e, "missing_sentinel_creds"),
  );
  assert.throws(() =>
    new CotalEndpoint({ space: "s", card: { name: "a" }, lifecycleUid: "short" })
  );
  assert.throws(
    () => new CotalEndpoint({ space: "s", card: { name: "a" }, channels: ["a/b"] }),
    (e) => isCotalError(e, "invalid_channel"),
  );
  assert.throws(
    () => new CotalEndpoint({ space: "s", card: { name: "a" }, heartbeatMs: 6000, ttlMs: 6000 }),
    (e) => isCotalError(e, "invalid_presence_timing"),
  );
  const fn = new CotalEndpoint({
    space: "s",
    card: { name: "a" },
    bearer: () => Promise.resolve("b"),
    sentinelCreds,
    consume: false,
  });
  await assert.rejects(() => fn.start(), (e) => isCotalError(e, "missing_principal"));
  const noUid = new CotalEndpoint({ space: "s", card: { name: "a", owner: "local", actor: "a" } });
  await assert.rejects(() => noUid.start(), (e) => isCotalError(e, "missing_lifecycle_uid"));
  const mesh = await startMesh();
  try {
    const alice = await mesh.agent("alice", policy);
    // The card may not claim another principal than the credential's.
    const liar = alice.endpoint({ card: { name: "alice", owner: "local", actor: "bob" } });
    await assert.rejects(() => liar.start(), (e) => isCotalError(e, "principal_mismatch"));
    const dead = alice.endpoint({ creds: await alice.mint(1) });
    await new Promise((r) => setTimeout(r, 1_100));
    await assert.rejects(() => dead.start(), (e) => isCotalError(e, "creds_expired"));
  } finally {
    await mesh[Symbol.asyncDispose]();
  }
});

Deno.test("endpoint - renewal schedule: creds at 75% of life, bearers 60 s ahead, never a tight loop", async () => {
  const auth = await createSpaceAuth("sched");
  const id = newIdentity();
  const mint = (ttl: number) =>
    mintCreds(auth, id, "agent", { lifecycleUid: "a".repeat(26), expiresInSeconds: ttl });
  const creds = new CredentialHolder({ creds: () => mint(1000) });
  const c = (await creds.load())!;
  const now = Date.now();
  assert.equal(creds.renewAt(now), c.issuedAt! + 750_000);
  // A failed renewal retries after 60 s, and always before the live one dies.
  assert.equal(creds.retryAt(now), now + 60_000);
  // The shortest agent cred policy allows (30 s).
  const short = new CredentialHolder({ creds: () => mint(30) });
  const s = (await short.load())!;
  assert.equal(short.renewAt(s.issuedAt!), s.issuedAt! + 22_500);
  assert.ok(short.retryAt(s.issuedAt! + 22_500) < s.expiresAt! - 2_000);
  // A string cannot renew: no timer at all.
  assert.equal(new CredentialHolder({ creds: await mint(100) }).renewAt(), undefined);

  const sentinelCreds = await mintCreds(auth, newIdentity(), "probe");
  const key = new TextEncoder().encode("test-only bearer signing key, 32+ bytes long");
  const bearer = (ttl: number) =>
    new SignJWT({}).setProtectedHeader({ alg: "HS256" }).setExpirationTime(
      Math.floor(Date.now() / 1000) + ttl,
    ).sign(key);
  const long = new CredentialHolder({ bearer: () => bearer(300), sentinelCreds });
  const l = (await long.load())!;
  assert.equal(long.renewAt(now), l.expiresAt! - 60_000);
  const brief = new CredentialHolder({ bearer: () => bearer(30), sentinelCreds });
  await brief.load();
  assert.equal(brief.renewAt(now), now + 5_000);
  // Shorter than twice the floor: halfway through what is left, before it dies.
  const tiny = new CredentialHolder({ bearer: () => bearer(4), sentinelCreds });
  const t = (await tiny.load())!;
  assert.equal(tiny.renewAt(now), now + (t.expiresAt! - now) / 2);
});
