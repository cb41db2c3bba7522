/**
 * A container's stripped signer bundle at the legacy `auth/auth.json` key: read where the split
 * records are absent, used to re-sign the daemon creds (each candidate proven on the real broker
 * first), and refused when it names another space, holds no account seed, or belongs to another
 * account (the preflight refuses what the broker would refuse; the last good cred stays).
 */
import assert from "node:assert/strict";
import { connect } from "../../lib/nats/connect.ts";
import {
  BROKER_AUTH_KEY,
  createSpaceAuth,
  deliveryCredsKey,
  getSpaceAuth,
  isCotalError,
  mintCreds,
  newIdentity,
  remintDaemonCreds,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
  serverConfig,
  SIGNER_BUNDLE_KEY,
  spaceAccountKey,
  stripSpaceAuth,
} from "../../mod.ts";
import { MemorySecretStore } from "../../lib/workspace/mod.ts";
import { credsAuthenticatorFast } from "../../lib/trust/connect_auth.ts";
import { startTestBroker, uniqueSpace } from "../_harness/broker.ts";

async function probe(url: string, creds: string): Promise<void> {
  const jwt = /BEGIN NATS USER JWT-+\n(\S+)\n/.exec(creds)![1];
  const sub = JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
  const nc = await connect({
    servers: url,
    authenticator: credsAuthenticatorFast(creds),
    inboxPrefix: `_INBOX_${sub}`,
    reconnect: false,
  });
  await nc.flush();
  await nc.close();
}

Deno.test("workspace - a stripped signer bundle at auth/auth.json signs the daemon creds, proven on the broker", async () => {
  const space = uniqueSpace("bundle");
  const auth = await createSpaceAuth(space);
  await using broker = await startTestBroker({
    config: ({ port, storeDir }) => serverConfig(auth, [auth], { port, storeDir }),
  });
  const store = new MemorySecretStore();
  const key = deliveryCredsKey(space, { injected: true });
  await store.put(key, await mintCreds(auth, newIdentity(), "delivery"));
  await store.put(SIGNER_BUNDLE_KEY, JSON.stringify(stripSpaceAuth(auth)));

  const read = await getSpaceAuth(store, space);
  assert.equal(read.account.pub, auth.account.pub);
  assert.equal(read.account.signingSeed, auth.account.signingSeed);
  assert.equal(read.operator.seed, "", "a stripped bundle holds no operator seed");

  await new Promise((r) => setTimeout(r, 1_100)); // a new second: a new JWT
  const before = await store.get(key);
  const [r] = await remintDaemonCreds("/unused", space, store, {
    preflight: (c) => probe(broker.url, c),
  });
  assert.equal(r.ok, true, JSON.stringify(r));
  const after = (await store.get(key))!;
  assert.notEqual(after, before);
  await probe(broker.url, after);

  // Another account's bundle with the same space label: its candidate is refused by the
  // preflight (the broker does not know its signer), and the last good cred stays.
  const other = await createSpaceAuth(space);
  await store.put(SIGNER_BUNDLE_KEY, JSON.stringify(stripSpaceAuth(other)));
  await new Promise((r) => setTimeout(r, 1_100));
  const [refused] = await remintDaemonCreds("/unused", space, store, {
    preflight: (c) => probe(broker.url, c),
  });
  assert.equal(refused.ok, false);
  assert.equal(refused.error?.code, "preflight_refused");
  assert.equal(await store.get(key), after);
  // Without a preflight, only a re-sign by the same signing key would be written: refused too.
  const [noPreflight] = await remintDaemonCreds("/unused", space, store);
  assert.equal(noPreflight.error?.code, "continuity_broken");
  assert.equal(await store.get(key), after);
});

Deno.test("workspace - a signer bundle for another space, or with no account seed, is refused; the split records win over it", async () => {
  const space = uniqueSpace("bundle");
  const auth = await createSpaceAuth(space);
  const store = new MemorySecretStore();
  await store.put(SIGNER_BUNDLE_KEY, JSON.stringify(stripSpaceAuth(await createSpaceAuth("x"))));
  await assert.rejects(getSpaceAuth(store, space), (e) => isCotalError(e, "wrong_space"));
  const noSeed = {
    ...stripSpaceAuth(auth),
    account: { ...auth.account, signingSeed: auth.operator.seed },
  };
  await store.put(SIGNER_BUNDLE_KEY, JSON.stringify(noSeed));
  await assert.rejects(
    getSpaceAuth(store, space),
    (e) => isCotalError(e, "corrupt_trust_record") && !e.message.includes(auth.operator.seed),
  );
  await store.put(SIGNER_BUNDLE_KEY, "{not json");
  await assert.rejects(getSpaceAuth(store, space), (e) => isCotalError(e, "corrupt_trust_record"));
  // With the split records present the bundle is never read.
  await store.put(BROKER_AUTH_KEY, serializeBrokerAuth(auth));
  await store.put(spaceAccountKey(space), serializeSpaceAccountAuth(auth));
  const full = await getSpaceAuth(store, space);
  assert.equal(full.operator.pub, auth.operator.pub);
  assert.notEqual(full.operator.seed, "");
});
