/** ensureCalloutAuth / loadCalloutAuth and the data-signer projection through a SecretStore. */
import assert from "node:assert/strict";
import {
  calloutKey,
  ensureCalloutAuth,
  loadCalloutAuth,
  loadServiceKeys,
  serviceKeysKey,
} from "../../lib/auth/callout_store.ts";
import { calloutAccountName, createCalloutAuth } from "../../lib/auth/callout_auth.ts";
import { decodeJwt } from "../../lib/nats/mod.ts";
import { createSpaceAuth, rotateDataAccountSigningKey } from "../../lib/trust/mod.ts";
import { FsSecretStore } from "../../lib/workspace/fs_secret_store.ts";
import { MemorySecretStore } from "../../lib/workspace/memory_secret_store.ts";
import { tempDir } from "../_harness/broker.ts";
import { code } from "./_helpers.ts";

Deno.test("callout store - ensure creates once, then loads the same account; never regenerates", async () => {
  const auth = await createSpaceAuth("alpha");
  const store = new MemorySecretStore();
  const first = await ensureCalloutAuth(store, auth);
  const again = await ensureCalloutAuth(store, auth);
  assert.deepEqual(again, first);
  assert.deepEqual(await loadCalloutAuth(store, "alpha"), first);
  const claims = await decodeJwt(first.account.jwt, { type: "account" });
  assert.equal(claims.name, calloutAccountName("alpha"));
  assert.equal(claims.iss, auth.operator.pub);
  // The signer projection holds the data signing seed, never the account seed.
  const keys = await loadServiceKeys(store, "alpha");
  assert.deepEqual(keys, {
    space: "alpha",
    dataAccount: { pub: auth.account.pub, signingSeed: auth.account.signingSeed },
  });
  assert.ok(!(await store.get(serviceKeysKey("alpha")))!.includes(auth.account.seed));
});

Deno.test("callout store - a rotated data signing key reaches the projection on the next ensure", async () => {
  const auth = await createSpaceAuth("alpha");
  const store = new MemorySecretStore();
  const callout = await ensureCalloutAuth(store, auth);
  const rotated = await rotateDataAccountSigningKey(auth);
  assert.deepEqual(await ensureCalloutAuth(store, rotated), callout);
  assert.equal(
    (await loadServiceKeys(store, "alpha")).dataAccount.signingSeed,
    rotated.account.signingSeed,
  );
});

Deno.test("callout store - refuses another operator's or data account's callout record", async () => {
  const auth = await createSpaceAuth("alpha");
  const other = await createSpaceAuth("alpha");
  const store = new MemorySecretStore();
  await ensureCalloutAuth(store, auth);
  await assert.rejects(ensureCalloutAuth(store, other), code("callout_foreign"));
  await assert.rejects(
    ensureCalloutAuth(store, { ...auth, account: other.account }),
    code("callout_foreign"),
  );
});

Deno.test("callout store - absent and malformed records are refused without echoing secrets", async () => {
  const store = new MemorySecretStore();
  await assert.rejects(loadCalloutAuth(store, "alpha"), code("callout_missing"));
  await assert.rejects(loadServiceKeys(store, "alpha"), code("service_keys_missing"));
  const auth = await createSpaceAuth("alpha");
  const good = await createCalloutAuth({
    space: "alpha",
    operatorSeed: auth.operator.seed,
    accountPub: auth.account.pub,
  });
  const cases: [string, unknown][] = [
    ["not JSON", "{"],
    ["wrong version", { ver: 2, callout: good }],
    ["another space", { ver: 1, callout: { ...good, space: "beta" } }],
    ["seed not matching", {
      ver: 1,
      callout: { ...good, xkey: { ...good.xkey, pub: good.account.signingPub } },
    }],
    ["foreign allowed account", { ver: 1, callout: { ...good, dataAccount: good.account.pub } }],
    ["bad creds", { ver: 1, callout: { ...good, sentinelCreds: "nope" } }],
  ];
  for (const [what, rec] of cases) {
    await store.put(calloutKey("alpha"), typeof rec === "string" ? rec : JSON.stringify(rec));
    const err = await loadCalloutAuth(store, "alpha").catch((e) => e);
    assert.ok(code("callout_record_malformed")(err), what);
    assert.ok(!err.message.includes(good.xkey.seed) && !err.message.includes("SA"), what);
  }
  await store.put(serviceKeysKey("alpha"), JSON.stringify({ ver: 1, space: "alpha" }));
  await assert.rejects(loadServiceKeys(store, "alpha"), code("service_keys_malformed"));
});

Deno.test("callout store - on the filesystem store the records are 0600 under space.<hex>/", async () => {
  const dir = await tempDir("cotal-callout-store-");
  const store = new FsSecretStore(dir);
  const auth = await createSpaceAuth("alpha");
  await ensureCalloutAuth(store, auth);
  for (const key of [calloutKey("alpha"), serviceKeysKey("alpha")]) {
    assert.match(key, /^space\.[0-9a-f]{32}\//);
    assert.equal((await Deno.stat(`${dir}/${key}`)).mode! & 0o777, 0o600);
  }
});

Deno.test("callout store - createCalloutAuth refuses bad inputs", async () => {
  const auth = await createSpaceAuth("alpha");
  await assert.rejects(
    createCalloutAuth({
      space: "",
      operatorSeed: auth.operator.seed,
      accountPub: auth.account.pub,
    }),
    code("callout_bad_space"),
  );
  await assert.rejects(
    createCalloutAuth({ space: "a", operatorSeed: auth.operator.seed, accountPub: "Ubad" }),
    code("callout_bad_account"),
  );
  await assert.rejects(
    createCalloutAuth({
      space: "a",
      operatorSeed: auth.account.signingSeed,
      accountPub: auth.account.pub,
    }),
    code("callout_bad_operator"),
  );
});
