import assert from "node:assert/strict";
import { issuerKey, ownerSecretKey } from "../../lib/auth/keys.ts";
import {
  ensureIssuer,
  ensureOwnerSecret,
  loadIssuer,
  loadOwnerSecret,
  saveIssuer,
} from "../../lib/auth/secrets.ts";
import { validateUserToken } from "../../lib/auth/validate.ts";
import { MemorySecretStore } from "../../lib/workspace/memory_secret_store.ts";
import { code, ownerFor } from "./_helpers.ts";

const SPACE = "alpha";

Deno.test("auth - ensureIssuer creates once; loadIssuer reads the same keys", async () => {
  const store = new MemorySecretStore();
  await assert.rejects(loadIssuer(store, SPACE), code("issuer_missing"));
  const a = await ensureIssuer(store, SPACE);
  const b = await ensureIssuer(store, SPACE);
  assert.equal(b.activeKid, a.activeKid, "a second ensure adopts the stored issuer");
  const loaded = await loadIssuer(store, SPACE);
  const { token } = await a.issue({ space: SPACE, owner: await ownerFor("x"), actor: "bob" });
  await validateUserToken(token, { space: SPACE, resolver: loaded.resolver() });
  // Concurrent first users converge on one winner.
  const fresh = new MemorySecretStore();
  const racers = await Promise.all([1, 2, 3, 4].map(() => ensureIssuer(fresh, SPACE)));
  assert.equal(new Set(racers.map((i) => i.activeKid)).size, 1);
});

Deno.test("auth - saveIssuer persists a rotation; malformed records are refused", async () => {
  const store = new MemorySecretStore();
  const issuer = await ensureIssuer(store, SPACE);
  const kid = await issuer.rotate();
  await saveIssuer(store, issuer);
  assert.equal((await loadIssuer(store, SPACE)).activeKid, kid);
  await store.put(issuerKey(SPACE), "{garbage");
  await assert.rejects(loadIssuer(store, SPACE), code("issuer_record_malformed"));
  // ensure never regenerates over a malformed record: it refuses the same way.
  await assert.rejects(ensureIssuer(store, SPACE), code("issuer_record_malformed"));
});

Deno.test("auth - owner secret: 32 random bytes, create-once, strict load", async () => {
  const store = new MemorySecretStore();
  await assert.rejects(loadOwnerSecret(store, SPACE), code("owner_secret_missing"));
  const s1 = await ensureOwnerSecret(store, SPACE);
  assert.equal(s1.byteLength, 32);
  assert.deepEqual(await ensureOwnerSecret(store, SPACE), s1);
  assert.deepEqual(await loadOwnerSecret(store, SPACE), s1);
  assert.notDeepEqual(await ensureOwnerSecret(store, "beta"), s1, "one secret per space");
  const stored = (await store.get(ownerSecretKey(SPACE)))!;
  for (
    const bad of [
      "nope",
      JSON.stringify({ ver: 2, secretB64: JSON.parse(stored).secretB64 }),
      JSON.stringify({ ver: 1, secretB64: btoa("short") }),
      JSON.stringify({ ver: 1, secretB64: "!!!" }),
      JSON.stringify({ ver: 1 }),
    ]
  ) {
    await store.put(ownerSecretKey(SPACE), bad);
    await assert.rejects(loadOwnerSecret(store, SPACE), code("owner_secret_malformed"));
    await assert.rejects(ensureOwnerSecret(store, SPACE), code("owner_secret_malformed"));
  }
});

Deno.test("auth - secret-kind errors never echo stored bytes", async () => {
  const store = new MemorySecretStore();
  const marker = "SECRETBYTES1234567890";
  await store.put(issuerKey(SPACE), `{"ver":1,"issuer":"${marker}"`);
  await store.put(ownerSecretKey(SPACE), `{"ver":1,"secretB64":"${marker}"}`);
  for (const p of [loadIssuer(store, SPACE), loadOwnerSecret(store, SPACE)]) {
    await assert.rejects(p, (e: Error) => !e.message.includes(marker));
  }
});
