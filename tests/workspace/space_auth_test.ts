import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import {
  createBrokerAuth,
  createSpaceAccountAuth,
  createSpaceAuth,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
} from "../../lib/trust/mod.ts";
import {
  BROKER_AUTH_KEY,
  getSpaceAuth,
  MemorySecretStore,
  type SecretStore,
  spaceAccountKey,
} from "../../lib/workspace/mod.ts";

async function storeFor(space: string): Promise<MemorySecretStore> {
  const auth = await createSpaceAuth(space);
  return new MemorySecretStore([
    [BROKER_AUTH_KEY, serializeBrokerAuth(auth)],
    [spaceAccountKey(space), serializeSpaceAccountAuth(auth)],
  ]);
}

async function refused(p: Promise<unknown>, code: CotalErrorCode, secret?: string) {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isCotalError(err, code), `expected ${code}, got ${String(err)}`);
    if (secret !== undefined) assert.ok(!err.message.includes(secret), err.message);
    return true;
  });
}

Deno.test("workspace - getSpaceAuth composes and verifies the two trust records", async () => {
  const store = await storeFor("alpha");
  const auth = await getSpaceAuth(store, "alpha");
  assert.equal(auth.space, "alpha");
  assert.match(auth.account.signingSeed, /^SA/);
  assert.match(auth.operator.seed, /^SO/);
  // The SYS seed is never persisted, so it is never read back either.
  assert.equal(auth.sys.signingSeed, undefined);
});

Deno.test("workspace - getSpaceAuth refuses a missing record, naming the key", async () => {
  const store = await storeFor("alpha");
  await store.delete(spaceAccountKey("alpha"));
  await refused(getSpaceAuth(store, "alpha"), "no_space_auth");
  await assert.rejects(getSpaceAuth(store, "alpha"), (err: Error) => {
    assert.ok(err.message.includes(spaceAccountKey("alpha")));
    return true;
  });
  await refused(getSpaceAuth(new MemorySecretStore(), "alpha"), "no_space_auth");
});

Deno.test("workspace - getSpaceAuth refuses another space's record and never echoes it", async () => {
  const beta = await createSpaceAuth("beta-secret-label");
  const store = await storeFor("alpha");
  // Beta's account stored under alpha's key: the label and the signed name both disagree.
  await store.put(spaceAccountKey("alpha"), serializeSpaceAccountAuth(beta));
  await refused(getSpaceAuth(store, "alpha"), "wrong_space", "beta-secret-label");
  // A relabelled copy (label says alpha, signed name says beta) is caught by the chain.
  const relabelled = serializeSpaceAccountAuth({ ...beta, space: "alpha" });
  await store.put(spaceAccountKey("alpha"), relabelled);
  await refused(getSpaceAuth(store, "alpha"), "wrong_space", beta.account.signingSeed);
});

Deno.test("workspace - getSpaceAuth refuses an account of another operator", async () => {
  const mine = await createBrokerAuth("mine");
  const theirs = await createBrokerAuth("theirs");
  const account = await createSpaceAccountAuth(theirs, "alpha");
  const store = new MemorySecretStore([
    [BROKER_AUTH_KEY, serializeBrokerAuth(mine)],
    [spaceAccountKey("alpha"), serializeSpaceAccountAuth(account)],
  ]);
  await refused(getSpaceAuth(store, "alpha"), "foreign_account", account.account.seed);
});

Deno.test("workspace - getSpaceAuth errors never echo stored bytes", async () => {
  const store = await storeFor("alpha");
  const text = (await store.get(spaceAccountKey("alpha")))!;
  const seed = JSON.parse(text).account.signingSeed as string;
  // Corrupt JSON that still carries the seed: the error must say so without quoting it.
  await store.put(spaceAccountKey("alpha"), `{"space": "alpha", ${seed}`);
  await refused(getSpaceAuth(store, "alpha"), "corrupt_trust_record", seed);
  // A tampered signing seed (the record no longer matches its own keys).
  const tampered = JSON.parse(text);
  tampered.account.signingSeed = tampered.account.seed;
  await store.put(spaceAccountKey("alpha"), JSON.stringify(tampered));
  await refused(getSpaceAuth(store, "alpha"), "corrupt_trust_record", tampered.account.seed);
  await store.put(BROKER_AUTH_KEY, "SOAAAAsecretish not json");
  await refused(getSpaceAuth(store, "alpha"), "corrupt_trust_record", "SOAAAAsecretish");
});

Deno.test("workspace - getSpaceAuth reads a throwing store as a refusal, not absence", async () => {
  const store: SecretStore = {
    get: () => Promise.reject(new Error("KMS timeout with token abc123")),
    put: () => Promise.resolve(),
    create: () => Promise.resolve(true),
    delete: () => Promise.resolve(),
  };
  await refused(getSpaceAuth(store, "alpha"), "space_auth_unreadable", "abc123");
});
