/**
 * A `SecretStore` of only the specification's `get`, `put` and `delete` (no `create`) carries
 * the bootstrap, the auth service's secrets and the IdP pin: what an embedder with its own
 * store meets first.
 */
import assert from "node:assert/strict";
import { ensureIdpPin } from "../../lib/auth/idp_pin.ts";
import { ensureIssuer, ensureOwnerSecret } from "../../lib/auth/secrets.ts";
import { ensureCalloutAuth } from "../../lib/auth/callout_store.ts";
import { ensureBrokerAuth, ensureSpaceAccount } from "../../lib/mesh/trust_state.ts";
import { composeSpaceAuth } from "../../lib/trust/mod.ts";
import { createOnce, type SecretStore } from "../../lib/workspace/mod.ts";

/** The specification's store: three methods over a Map. */
function specStore(): SecretStore & { readonly map: Map<string, string> } {
  const map = new Map<string, string>();
  return {
    map,
    get: (k) => Promise.resolve(map.get(k)),
    put: (k, v) => Promise.resolve(void map.set(k, v)),
    delete: (k) => Promise.resolve(void map.delete(k)),
  };
}

Deno.test("workspace - createOnce writes an absent key once, with or without the store's own create", async () => {
  const store = specStore();
  assert.equal(await createOnce(store, "k", "a"), true);
  assert.equal(await createOnce(store, "k", "b"), false);
  assert.equal(store.map.get("k"), "a");
  // A store with create is asked through it (its atomicity is what callers rely on).
  const asked: string[] = [];
  const withCreate: SecretStore = {
    ...specStore(),
    create: (k) => Promise.resolve(asked.push(k) > 0),
  };
  assert.equal(await createOnce(withCreate, "x", "v"), true);
  assert.deepEqual(asked, ["x"]);
});

Deno.test("workspace - a get/put/delete store carries the bootstrap, the auth service's secrets and the IdP pin", async () => {
  const store = specStore();
  const first = await ensureBrokerAuth(store, "embedder");
  assert.equal(first.created, true);
  const again = await ensureBrokerAuth(store, "embedder");
  assert.equal(again.created, false);
  assert.equal(again.broker.operator.pub, first.broker.operator.pub);
  const acct = await ensureSpaceAccount(store, first.broker, "team");
  assert.equal(acct.created, true);
  assert.equal((await ensureSpaceAccount(store, first.broker, "team")).created, false);

  const issuer = await ensureIssuer(store, "team");
  assert.equal((await ensureIssuer(store, "team")).exportRecord(), issuer.exportRecord());
  const secret = await ensureOwnerSecret(store, "team");
  assert.deepEqual(await ensureOwnerSecret(store, "team"), secret);
  const auth = composeSpaceAuth(first.broker, acct.account);
  const callout = await ensureCalloutAuth(store, auth);
  assert.equal((await ensureCalloutAuth(store, auth)).account.pub, callout.account.pub);
  const pin = {
    issuer: "https://idp.example",
    audience: "cotal",
    jwksUrl: "https://idp.example/jwks",
  };
  assert.deepEqual(await ensureIdpPin(store, "team", pin), await ensureIdpPin(store, "team", pin));
  await assert.rejects(
    () => ensureIdpPin(store, "team", { ...pin, audience: "other" }),
    /already pinned to another IdP configuration/,
  );
});
