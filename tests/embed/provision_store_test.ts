/**
 * An embedder that imports nothing but `mod.ts` provisions its own get/put/delete store by hand:
 * the signer records, the daemon creds, the `$SYS` creds and `membership.json`, each under the
 * key the contract exports, with the record text the contract's serializers write. The daemons
 * read it as provisioned: the signer round-trips through `getSpaceAuth`, the delivery daemon
 * serves with its membership feed up (not degraded), and a re-sign lands in the same store.
 */
import assert from "node:assert/strict";
import {
  BROKER_AUTH_KEY,
  composeSpaceAuth,
  connectionEvictorCredsKey,
  createBrokerAuth,
  createSpaceAccountAuth,
  deliveryCredsKey,
  getSpaceAuth,
  membershipConfigKey,
  membershipObserverCredsKey,
  membershipRwCredsKey,
  mintConnectionEvictorCreds,
  mintCreds,
  mintMembershipObserverCreds,
  newIdentity,
  remintDaemonCreds,
  runDelivery,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
  serverConfig,
  setupSpaceStreams,
  spaceAccountKey,
} from "../../mod.ts";
import { startTestBroker, uniqueSpace, waitFor } from "../_harness/broker.ts";
import { MapStore } from "../_harness/map_store.ts";

Deno.test("embed - a store provisioned by hand from mod.ts alone serves the delivery daemon whole, membership feed included", async () => {
  const space = uniqueSpace("embed");
  const broker = await createBrokerAuth("embedder");
  const account = await createSpaceAccountAuth(broker, space);
  const auth = composeSpaceAuth(broker, account);
  const store = new MapStore();
  const at = { injected: true } as const;
  // What `cotal up` would write, written by the embedder through the contract.
  await store.put(BROKER_AUTH_KEY, serializeBrokerAuth(broker));
  await store.put(spaceAccountKey(space), serializeSpaceAccountAuth(account));
  await store.put(deliveryCredsKey(space, at), await mintCreds(auth, newIdentity(), "delivery"));
  await store.put(
    membershipRwCredsKey(space, at),
    await mintCreds(auth, newIdentity(), "membership-rw"),
  );
  await store.put(
    membershipObserverCredsKey(space, at),
    await mintMembershipObserverCreds(
      { sys: broker.sys, account: { pub: account.account.pub } },
      newIdentity(),
    ),
  );
  await store.put(
    connectionEvictorCredsKey(space, at),
    await mintConnectionEvictorCreds({ sys: broker.sys }, newIdentity()),
  );
  await store.put(
    membershipConfigKey(space, at),
    JSON.stringify({ accountId: account.account.pub }) + "\n",
  );

  // The signer records read back as the same chain.
  const read = await getSpaceAuth(store, space);
  assert.equal(read.account.pub, account.account.pub);
  assert.equal(read.operator.pub, broker.operator.pub);

  await using nats = await startTestBroker({
    config: ({ port, storeDir }) => serverConfig(broker, [auth], { port, storeDir }),
  });
  await setupSpaceStreams({
    servers: nats.url,
    space,
    creds: await mintCreds(auth, newIdentity(), "provisioner"),
  });
  const lines: string[] = [];
  const log = {
    info: (l: string) => lines.push(`info: ${l}`),
    warn: (l: string) => lines.push(`warning: ${l}`),
    error: (l: string) => lines.push(`error: ${l}`),
  };
  const daemon = await runDelivery(
    { values: { space, server: nats.url }, positionals: [], raw: [] },
    store,
    { log },
  );
  try {
    await waitFor(() => daemon.status().membership.state === "up", {
      timeoutMs: 20_000,
      what: "the membership feed up",
    });
    assert.ok(!lines.some((l) => l.includes("traffic-only")), lines.join("\n"));
    // The renewal owner re-signs into the same store, proven on the broker first.
    const before = await store.get(deliveryCredsKey(space, at));
    // A re-sign in the same second as the mint is the same JWT (ed25519 is deterministic).
    await new Promise((r) => setTimeout(r, 1_100));
    const r = await remintDaemonCreds("/unused", space, store);
    assert.ok(r.every((x) => x.ok), JSON.stringify(r));
    assert.notEqual(await store.get(deliveryCredsKey(space, at)), before);
  } finally {
    await daemon.stop();
  }
  // Nothing but what was provisioned, and the re-signed creds, is in the store.
  assert.deepEqual(
    store.keys(),
    [
      BROKER_AUTH_KEY,
      spaceAccountKey(space),
      connectionEvictorCredsKey(space, at),
      deliveryCredsKey(space, at),
      membershipConfigKey(space, at),
      membershipObserverCredsKey(space, at),
      membershipRwCredsKey(space, at),
    ].sort(),
  );
});
