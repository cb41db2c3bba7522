import assert from "node:assert/strict";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";
import { parseCreds, type UserClaims } from "../../lib/nats/mod.ts";
import {
  createSpaceAuth,
  mintCreds,
  newIdentity,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
  type SpaceAuth,
} from "../../lib/trust/mod.ts";
import {
  BROKER_AUTH_KEY,
  credFingerprint,
  deliveryCredsKey,
  membershipRwCredsKey,
  MemorySecretStore,
  remintDaemonCreds,
  type SecretStore,
  spaceAccountKey,
  workspaceSecretStore,
} from "../../lib/workspace/mod.ts";

const C = { injected: true } as const;

async function setup(space = "alpha", ttl?: number) {
  const auth = await createSpaceAuth(space);
  const store = new MemorySecretStore();
  await store.put(BROKER_AUTH_KEY, serializeBrokerAuth(auth));
  await store.put(spaceAccountKey(space), serializeSpaceAccountAuth(auth));
  const delivery = await mintCreds(auth, newIdentity(), "delivery", {
    ...(ttl ? { expiresInSeconds: ttl } : {}),
  });
  const rw = await mintCreds(auth, newIdentity(), "membership-rw");
  await store.put(deliveryCredsKey(space, C), delivery);
  await store.put(membershipRwCredsKey(space, C), rw);
  return { auth, store, delivery, rw };
}

async function claims(creds: string): Promise<UserClaims> {
  return decodeJwtUnverified((await parseCreds(creds)).jwt) as UserClaims;
}

async function installSigner(store: SecretStore, auth: SpaceAuth, space = auth.space) {
  await store.put(BROKER_AUTH_KEY, serializeBrokerAuth(auth));
  await store.put(spaceAccountKey(space), serializeSpaceAccountAuth(auth));
}

Deno.test("workspace - remintDaemonCreds re-signs both daemon creds for their own nkeys", async () => {
  const { store, delivery, rw } = await setup("alpha", 600);
  // iat has one-second resolution: make sure the re-sign is a different JWT.
  await new Promise((r) => setTimeout(r, 1100));
  const results = await remintDaemonCreds("/unused", "alpha", store);
  assert.deepEqual(results.map((r) => [r.file, r.ok]), [
    ["delivery.creds", true],
    ["membership-rw.creds", true],
  ]);
  const after = (await store.get(deliveryCredsKey("alpha", C)))!;
  assert.notEqual(after, delivery);
  const [old, now] = [await claims(delivery), await claims(after)];
  assert.equal(now.sub, old.sub);
  assert.equal(now.iss, old.iss);
  assert.equal(now.name, "delivery");
  assert.deepEqual(now.nats.tags, old.nats.tags);
  assert.deepEqual(now.nats.pub, old.nats.pub);
  assert.deepEqual(now.nats.sub, old.nats.sub);
  // The lifetime span is kept (a 10-minute cred stays a 10-minute cred).
  assert.equal(now.exp! - now.iat, 600);
  assert.ok(now.iat > old.iat);
  assert.equal(results[0].fingerprint, credFingerprint((await parseCreds(after)).jwt));
  assert.equal(results[0].expiresAt, now.exp);
  const rwAfter = (await store.get(membershipRwCredsKey("alpha", C)))!;
  assert.equal((await claims(rwAfter)).sub, (await claims(rw)).sub);
  assert.equal((await claims(rwAfter)).name, "membership-rw");
});

Deno.test("workspace - remintDaemonCreds works on the filesystem workspace store", async () => {
  const root = await Deno.makeTempDir({ prefix: "cotal-remint-" });
  try {
    const { store: mem } = await setup("alpha");
    const fs = workspaceSecretStore(root);
    for (
      const key of [
        BROKER_AUTH_KEY,
        spaceAccountKey("alpha"),
        deliveryCredsKey("alpha", C),
        membershipRwCredsKey("alpha", C),
      ]
    ) await fs.put(key, (await mem.get(key))!);
    const results = await remintDaemonCreds(root, "alpha");
    assert.ok(results.every((r) => r.ok), JSON.stringify(results));
    assert.equal(results[0].key, deliveryCredsKey("alpha", { root }));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("workspace - remintDaemonCreds refuses a wrong-space signer and keeps the last good creds", async () => {
  const { store, delivery, rw } = await setup("alpha");
  const beta = await createSpaceAuth("beta");
  // The store's alpha slot now holds beta's trust: the signer is checked against the space.
  await installSigner(store, beta, "alpha");
  const results = await remintDaemonCreds("/unused", "alpha", store);
  assert.ok(
    results.every((r) => !r.ok && r.error?.code === "wrong_space"),
    JSON.stringify(results),
  );
  assert.equal(await store.get(deliveryCredsKey("alpha", C)), delivery);
  assert.equal(await store.get(membershipRwCredsKey("alpha", C)), rw);
});

Deno.test("workspace - remintDaemonCreds refuses a same-label alternate signer without a preflight", async () => {
  const { store, delivery } = await setup("alpha");
  // Two createSpaceAuth("alpha") calls: same name, different account. The chain is valid; the
  // continuity (same signing key as the current cred) is not.
  const alternate = await createSpaceAuth("alpha");
  await installSigner(store, alternate);
  const results = await remintDaemonCreds("/unused", "alpha", store);
  assert.equal(results[0].ok, false);
  assert.equal(results[0].error?.code, "continuity_broken");
  assert.equal(await store.get(deliveryCredsKey("alpha", C)), delivery);
  // A preflight that accepts is what authorizes a discontinuous re-sign.
  const ok = await remintDaemonCreds("/unused", "alpha", store, {
    preflight: () => Promise.resolve(),
  });
  assert.equal(ok[0].ok, true);
  assert.equal(
    (await claims((await store.get(deliveryCredsKey("alpha", C)))!)).iss,
    alternate.account.signingPub,
  );
});

Deno.test("workspace - remintDaemonCreds lets a failing preflight keep the last good creds", async () => {
  const { store, delivery, rw } = await setup("alpha");
  const seen: string[] = [];
  for (
    const preflight of [
      (c: string, i: { file: string }) => {
        seen.push(i.file);
        assert.match(c, /BEGIN NATS USER JWT/);
        return Promise.resolve(false);
      },
      () => Promise.reject(new Error("authorization violation")),
    ]
  ) {
    const results = await remintDaemonCreds("/unused", "alpha", store, { preflight });
    assert.ok(results.every((r) => !r.ok && r.error?.code === "preflight_refused"));
    assert.equal(await store.get(deliveryCredsKey("alpha", C)), delivery);
    assert.equal(await store.get(membershipRwCredsKey("alpha", C)), rw);
  }
  assert.deepEqual(seen, ["delivery.creds", "membership-rw.creds"]);
});

Deno.test("workspace - remintDaemonCreds never mints a missing cred and reports an empty store", async () => {
  const { store } = await setup("alpha");
  await store.delete(membershipRwCredsKey("alpha", C));
  const results = await remintDaemonCreds("/unused", "alpha", store);
  assert.equal(results[0].ok, true);
  assert.deepEqual(
    { ok: results[1].ok, skipped: results[1].skipped },
    { ok: false, skipped: "missing-file" },
  );
  assert.equal(await store.get(membershipRwCredsKey("alpha", C)), undefined);
  const empty = await remintDaemonCreds("/unused", "alpha", new MemorySecretStore());
  assert.ok(empty.every((r) => r.skipped === "no-auth" && !r.ok));
});

Deno.test("workspace - remintDaemonCreds never throws, even on a refusing store or bad input", async () => {
  const broken: SecretStore = {
    get: () => Promise.reject(new Error("boom")),
    put: () => Promise.reject(new Error("boom")),
    create: () => Promise.reject(new Error("boom")),
    delete: () => Promise.reject(new Error("boom")),
  };
  const a = await remintDaemonCreds("/unused", "alpha", broken);
  assert.ok(a.every((r) => !r.ok && r.error?.code === "space_auth_unreadable"));
  const b = await remintDaemonCreds("", "", undefined);
  assert.ok(b.every((r) => !r.ok && r.error !== undefined));
  // A cred of the wrong profile under the delivery key is refused, not re-signed as delivery.
  const { auth, store } = await setup("alpha");
  await store.put(deliveryCredsKey("alpha", C), await mintCreds(auth, newIdentity(), "admin"));
  const c = await remintDaemonCreds("/unused", "alpha", store);
  assert.equal(c[0].error?.code, "cred_profile_mismatch");
  await store.put(deliveryCredsKey("alpha", C), "garbage");
  const d = await remintDaemonCreds("/unused", "alpha", store);
  assert.equal(d[0].error?.code, "current_cred_unreadable");
  assert.ok(!d[0].error!.message.includes("garbage"));
});

Deno.test("workspace - a re-sign of the supervisor's stored cred gives it a day at most, however long the stored one ran", async () => {
  const { auth, store } = await setup("alpha");
  const { SUPERVISOR_CRED, supervisorCredsKey } = await import("../../lib/workspace/mod.ts");
  const key = supervisorCredsKey("alpha", C);
  // A supervisor cred written for the profile's longest, seven days (the request path allows a day).
  const week = await mintCreds(auth, newIdentity(), "supervisor", { expiresInSeconds: 7 * 86400 });
  await store.put(key, week);
  const results = await remintDaemonCreds("/unused", "alpha", store, { also: [SUPERVISOR_CRED] });
  assert.deepEqual(results.find((r) => r.file === "supervisor.creds")?.ok, true);
  const now = await claims((await store.get(key))!);
  assert.equal(now.sub, (await claims(week)).sub);
  assert.equal(now.exp! - now.iat, 86400);
  // A daemon cred keeps its own span: the cap is the supervisor cred's alone.
  const { deliveryCredsKey: dk } = await import("../../lib/workspace/mod.ts");
  await store.put(
    dk("alpha", C),
    await mintCreds(auth, newIdentity(), "delivery", { expiresInSeconds: 3 * 86400 }),
  );
  await remintDaemonCreds("/unused", "alpha", store);
  const d = await claims((await store.get(dk("alpha", C)))!);
  assert.equal(d.exp! - d.iat, 3 * 86400);
});

Deno.test("workspace - the next re-sign comes at half the shortest life left, sooner after a failure, within the schedule", async () => {
  const { nextResignDelayMs, RESIGN_RETRY_MS } = await import("../../lib/workspace/mod.ts");
  const now = 1_000_000_000_000;
  const at = (s: number) => Math.floor(now / 1000) + s;
  const ok = (expiresIn: number) => ({ file: "f", key: "k", ok: true, expiresAt: at(expiresIn) });
  const max = 6 * 3600 * 1000;
  // A day-long cred: the 6-hour schedule.
  assert.equal(nextResignDelayMs([ok(86400)], { maxMs: max, now }), max);
  // A 30-second cred (an embedder's): in 15 s, well before its daemon's 75 %.
  assert.equal(nextResignDelayMs([ok(86400), ok(30)], { maxMs: max, now }), 15_000);
  // A failed re-sign is tried again within a minute; a missing cred does not hurry anything.
  const failed = { file: "f", key: "k", ok: false, error: { code: "x", message: "y" } };
  assert.equal(nextResignDelayMs([ok(86400), failed], { maxMs: max, now }), RESIGN_RETRY_MS);
  const missing = { file: "f", key: "k", ok: false, skipped: "missing-file" as const };
  assert.equal(nextResignDelayMs([missing], { maxMs: max, now }), max);
  // Never a busy loop: at least a second.
  assert.equal(nextResignDelayMs([ok(1)], { maxMs: max, now }), 1_000);
});
