import assert from "node:assert/strict";
import { encodeJwt, renderCreds, seedSigner } from "../../lib/nats/mod.ts";
import {
  createSpaceAuth,
  mintConnectionEvictorCreds,
  mintCreds,
  newIdentity,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
} from "../../lib/trust/mod.ts";
import {
  BROKER_AUTH_KEY,
  connectionEvictorCredsKey,
  credHealth,
  deliveryCredsKey,
  doctorAuth,
  membershipRwCredsKey,
  MemorySecretStore,
  spaceAccountKey,
  workspaceSecretStore,
} from "../../lib/workspace/mod.ts";

import { resignedUntil } from "../_harness/short_creds.ts";

const C = { injected: true } as const;

async function unboundedCreds(signingSeed: string, accountPub: string): Promise<string> {
  const id = newIdentity();
  const jwt = await encodeJwt({
    sub: id.id,
    name: "legacy",
    nats: {
      type: "user",
      issuer_account: accountPub,
      pub: { allow: ["x"] },
      sub: { allow: ["y"] },
    },
  }, await seedSigner(signingSeed));
  return await renderCreds(jwt, id.seed);
}

Deno.test("workspace - credHealth grades healthy, near-expiry, expired, unbounded, unreadable", async () => {
  const auth = await createSpaceAuth("alpha");
  const now = Math.floor(Date.now() / 1000);
  const cred = await mintCreds(auth, newIdentity(), "delivery", { expiresInSeconds: 1000 });
  assert.equal((await credHealth(cred, now)).status, "healthy");
  assert.equal((await credHealth(cred, now + 760)).status, "near-expiry");
  const expired = await credHealth(cred, now + 1001);
  assert.equal(expired.status, "expired");
  assert.ok(expired.remainingSeconds! < 0);
  const unbounded = await unboundedCreds(auth.account.signingSeed, auth.account.pub);
  assert.equal((await credHealth(unbounded, now)).status, "unbounded");
  const bad = await credHealth("SUAAAA-not-a-creds-file", now);
  assert.equal(bad.status, "unreadable");
  assert.equal(bad.detail, "creds_bad_format");
});

Deno.test("workspace - doctorAuth reports every cred in a workspace store and --fix re-signs only daemon creds", async () => {
  const root = await Deno.makeTempDir({ prefix: "cotal-doctor-" });
  try {
    const auth = await createSpaceAuth("alpha");
    const store = workspaceSecretStore(root);
    await store.put(BROKER_AUTH_KEY, serializeBrokerAuth(auth));
    await store.put(spaceAccountKey("alpha"), serializeSpaceAccountAuth(auth));
    // One absolute expiry for the short creds, and a wait to a whole second past 75 % of it:
    // JWT times are whole seconds, so a relative sleep could land either side of the line.
    const base = Math.floor(Date.now() / 1000);
    // Shorter than policy mints: re-signed by the account, as an embedder's issuer may.
    const short = (creds: string) => resignedUntil(auth, creds, base + 10);
    const delivery = await short(await mintCreds(auth, newIdentity(), "delivery"));
    const rw = await mintCreds(auth, newIdentity(), "membership-rw");
    const evictor = await short(await mintConnectionEvictorCreds(auth, newIdentity()));
    const agent = await short(await mintCreds(auth, newIdentity(), "supervisor"));
    await store.put(deliveryCredsKey("alpha", C), delivery);
    await store.put(membershipRwCredsKey("alpha", C), rw);
    await store.put(connectionEvictorCredsKey("alpha", C), evictor);
    await store.put("agents/alice.creds", agent);
    await store.put("agents/broken.creds", "not a creds file");
    // An agent's cred the supervisor keeps in its space's dir.
    const inSpace = `${deliveryCredsKey("alpha", C).split("/")[0]}/agent.worker.u1.creds`;
    await store.put(inSpace, rw);
    while (Math.floor(Date.now() / 1000) < base + 8) await new Promise((r) => setTimeout(r, 50));

    const rows = await doctorAuth(root);
    const by = new Map(rows.map((r) => [r.key, r]));
    assert.equal(by.get(deliveryCredsKey("alpha", C))?.status, "near-expiry");
    assert.equal(by.get(deliveryCredsKey("alpha", C))?.daemon, true);
    assert.equal(by.get(deliveryCredsKey("alpha", C))?.space, "alpha");
    assert.equal(by.get(membershipRwCredsKey("alpha", C))?.status, "healthy");
    assert.equal(by.get(connectionEvictorCredsKey("alpha", C))?.daemon, false);
    assert.equal(by.get("agents/alice.creds")?.status, "near-expiry");
    assert.equal(by.get("agents/broken.creds")?.status, "unreadable");
    assert.equal(by.get(inSpace)?.space, "alpha", "an agent cred names its space");
    assert.equal(by.get(inSpace)?.daemon, false);
    assert.equal(by.get("agents/alice.creds")?.space, undefined);
    for (const r of rows) assert.ok(!JSON.stringify(r).includes("SU"), "a row leaked a seed");

    const fixed = await doctorAuth(root, undefined, { fix: true });
    const f = new Map(fixed.map((r) => [r.key, r]));
    assert.equal(f.get(deliveryCredsKey("alpha", C))?.fix?.ok, true);
    assert.equal(f.get(deliveryCredsKey("alpha", C))?.status, "healthy");
    // $SYS and agent creds are never re-signed by the doctor.
    assert.equal(f.get(connectionEvictorCredsKey("alpha", C))?.fix, undefined);
    assert.equal(await store.get(connectionEvictorCredsKey("alpha", C)), evictor);
    assert.equal(await store.get("agents/alice.creds"), agent);
    assert.equal(f.get("agents/alice.creds")?.status, "near-expiry");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("workspace - doctorAuth --fix refuses a broken continuity and needs spaces for an injected store", async () => {
  const auth = await createSpaceAuth("alpha");
  const store = new MemorySecretStore();
  // The signer in the store is a same-label alternate: re-signing would mint a broker-dead cred.
  const alternate = await createSpaceAuth("alpha");
  await store.put(BROKER_AUTH_KEY, serializeBrokerAuth(alternate));
  await store.put(spaceAccountKey("alpha"), serializeSpaceAccountAuth(alternate));
  const now = Math.floor(Date.now() / 1000);
  const delivery = await mintCreds(auth, newIdentity(), "delivery", { expiresAt: now + 100 });
  await store.put(deliveryCredsKey("alpha", C), delivery);
  await assert.rejects(doctorAuth("/unused", store), /pass the spaces/);
  const all = await doctorAuth("/unused", store, { spaces: ["alpha"], fix: true, now: now + 90 });
  // The three creds the space lacks are named missing, with what mints them.
  const missing = all.filter((r) => r.status === "missing");
  assert.deepEqual(missing.map((r) => r.kind).sort(), [
    "connection-evictor.creds",
    "membership-observer.creds",
    "membership-rw.creds",
  ]);
  assert.ok(missing.every((r) => /cotal up/.test(r.detail!)));
  const rows = all.filter((r) => r.status !== "missing");
  assert.equal(rows.length, 1);
  assert.equal(rows[0].status, "near-expiry");
  assert.equal(rows[0].fix?.ok, false);
  assert.equal(rows[0].fix?.error?.code, "continuity_broken");
  assert.equal(await store.get(deliveryCredsKey("alpha", C)), delivery);
});

Deno.test("workspace - a $SYS cred another system account signed is foreign, with the fix named (newcomer pass 5: a restore into another root)", async () => {
  const here = await createSpaceAuth("alpha");
  const elsewhere = await createSpaceAuth("alpha");
  const store = new MemorySecretStore();
  await store.put(BROKER_AUTH_KEY, serializeBrokerAuth(here));
  await store.put(spaceAccountKey("alpha"), serializeSpaceAccountAuth(here));
  await store.put(
    connectionEvictorCredsKey("alpha", C),
    await mintConnectionEvictorCreds(elsewhere, newIdentity()),
  );
  const rows = await doctorAuth("/nonexistent", store, { spaces: ["alpha"] });
  const evictor = rows.find((r) => r.kind === "connection-evictor.creds")!;
  assert.equal(evictor.status, "foreign");
  assert.match(evictor.detail!, /cotal down --keep-agents, then cotal up \(add --detach/);
  // Signed by this root's system account: healthy.
  await store.put(
    connectionEvictorCredsKey("alpha", C),
    await mintConnectionEvictorCreds(here, newIdentity()),
  );
  const again = await doctorAuth("/nonexistent", store, { spaces: ["alpha"] });
  assert.equal(again.find((r) => r.kind === "connection-evictor.creds")!.status, "healthy");
});
