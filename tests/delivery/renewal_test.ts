/**
 * The delivery cred's renewal loop end to end, hosted-style: the daemon runs in-process on an
 * injected in-memory store, and the test plays the renewal owner (remintDaemonCreds with a
 * broker preflight into the same store).
 */
import assert from "node:assert/strict";
import { connect } from "nats";
import { waitFor } from "../_harness/broker.ts";
import { type DeliveryLogger, deliveryRequest, runDelivery } from "../../lib/delivery/mod.ts";
import {
  createSpaceAuth,
  credsAuthenticatorFast,
  mintCreds,
  newIdentity,
  serverConfig,
} from "../../lib/trust/mod.ts";
import { setupSpaceStreams } from "../../lib/wire/mod.ts";
import {
  deliveryCredsKey,
  membershipObserverCredsKey,
  MemorySecretStore,
  remintDaemonCreds,
} from "../../lib/workspace/mod.ts";
import { startTestBroker, uniqueSpace } from "../_harness/broker.ts";
import { connectAs, drainDlv, fillStore, post } from "./_helpers.ts";
import { provisionAgent } from "../../lib/wire/mod.ts";
import { newLifecycleUid } from "../../lib/wire/mod.ts";

function capture(): DeliveryLogger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    info: (l) => void lines.push(`info: ${l}`),
    warn: (l) => void lines.push(`warning: ${l}`),
    error: (l) => void lines.push(`error: ${l}`),
  };
}

async function space(ttl: number) {
  const name = uniqueSpace("renew");
  const auth = await createSpaceAuth(name);
  const broker = await startTestBroker({
    config: ({ port, storeDir }) => serverConfig(auth, [auth], { port, storeDir }),
  });
  await setupSpaceStreams({
    servers: broker.url,
    space: name,
    creds: await mintCreds(auth, newIdentity(), "provisioner"),
  });
  const store = new MemorySecretStore();
  // No $SYS pair in this store: the feed must degrade and eviction must refuse.
  await fillStore(store, auth, { deliveryTtl: ttl, sys: false });
  const agent = async (actor: string) => {
    const identity = newIdentity();
    const uid = newLifecycleUid();
    const p = await provisionAgent({
      servers: broker.url,
      creds: await mintCreds(auth, newIdentity(), "provisioner"),
      space: name,
      auth,
      identity,
      principal: { owner: "local", actor },
      lifecycleUid: uid,
      subscribe: [],
      allowSubscribe: ["general"],
      allowPublish: ["general"],
    });
    return {
      name: actor,
      principal: { owner: "local", actor },
      id: `local.${actor}`,
      uid,
      creds: p.creds,
    };
  };
  return { name, auth, broker, store, agent };
}

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

Deno.test("delivery - a 30-second cred is re-signed into the store and adopted, never reaching expiry", async () => {
  const s = await space(30);
  const log = capture();
  const daemon = await runDelivery(
    { values: { space: s.name, server: s.broker.url }, positionals: [], raw: [] },
    s.store,
    { log },
  );
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const an = await connectAs(s.broker.url, alice.creds, { reconnect: true });
  const bn = await connectAs(s.broker.url, bob.creds, { reconnect: true });
  try {
    const start = Date.now();
    const firstExp = daemon.status().credential.expiresAt!;
    // Missing $SYS creds: the graph is traffic-only, loudly, and the backstop still serves.
    const feed = daemon.status().membership;
    assert.equal(feed.state, "down");
    assert.ok(
      feed.state === "down" &&
        feed.reason.includes(membershipObserverCredsKey(s.name, { injected: true })),
    );
    assert.ok(log.lines.some((l) => l.startsWith("warning: membership feed down")));
    await deliveryRequest(bn, s.name, bob.principal, "durableJoin", { channel: "general" });

    // The renewal owner re-signs at half the TTL, proving each candidate on the broker first.
    const results = [];
    for (const at of [15_000, 30_000, 45_000]) {
      await new Promise((r) => setTimeout(r, Math.max(0, start + at - Date.now())));
      const r = await remintDaemonCreds("/unused", s.name, s.store, {
        preflight: (c) => probe(s.broker.url, c),
      });
      results.push(r);
      assert.equal(r[0].ok, true, JSON.stringify(r[0]));
      assert.equal(r[0].key, deliveryCredsKey(s.name, { injected: true }));
      await post(an, s.name, alice, "general", `tick ${results.length}`);
    }
    const status = daemon.status();
    // Two generations were adopted (at 22.5 s and at 37.5 s); the first cred expired at 30 s.
    assert.ok(status.credential.adoptions >= 2, JSON.stringify(status.credential));
    assert.ok(Date.now() / 1000 > firstExp + 15, "the test outlived two original lifetimes");
    assert.ok(status.credential.expiresAt! > Date.now() / 1000);
    assert.equal(status.ready, true);
    assert.equal(status.credential.lastError, undefined);
    assert.ok(!log.lines.some((l) => /expired/i.test(l)), log.lines.join("\n"));
    // Still delivering after both earlier creds would have expired.
    const last = await post(an, s.name, alice, "general", "after renewal");
    const got = await drainDlv(bn, s.name, bob, { until: results.length + 1 });
    assert.ok(got.messages.some((m) => m.id === last.id));
    assert.equal(got.messages.length, results.length + 1);

    // Eviction needs the $SYS pair: without it the admin rail refuses, loudly.
    const mgr = await connectAs(
      s.broker.url,
      await mintCreds(s.auth, newIdentity(), "supervisor", {
        principal: { owner: "local", actor: "mgr" },
      }),
    );
    await assert.rejects(
      deliveryRequest(mgr, s.name, { owner: "local", actor: "mgr" }, "evictPrincipal", {
        principal: "local.bob",
      }, { service: "delivery-admin" }),
      (err: Error & { code?: string }) =>
        err.code === "sys_creds_missing" && /deny-new only/.test(err.message),
    );
    // An explicit reload on the admin rail reads the store now: the 45 s re-sign, not yet due
    // for the 75 % read, is proven and adopted; a second reload finds nothing new.
    const reload = () =>
      deliveryRequest(mgr, s.name, { owner: "local", actor: "mgr" }, "reloadCreds", {}, {
        service: "delivery-admin",
      });
    assert.equal((await reload()).kind, "adopted");
    // The resident connection moves onto the new cred just after the reply.
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal((await reload()).kind, "unchanged");
    await mgr.close();
  } finally {
    await an.close();
    await bn.close();
    await daemon.stop();
    await s.broker.stop();
  }
  assert.deepEqual(await daemon.closed, { code: 0, reason: "delivery daemon stopped" });
});

Deno.test("delivery - an unchanged cred past 75% of its life is a loud error, not a silent ride", async () => {
  const s = await space(4);
  const log = capture();
  const daemon = await runDelivery(
    { values: { space: s.name, server: s.broker.url }, positionals: [], raw: [] },
    s.store,
    { log },
  );
  try {
    await waitFor(() => daemon.status().credential.lastError !== undefined, {
      what: "the missed re-sign to be reported",
      timeoutMs: 6000,
    });
    assert.match(daemon.status().credential.lastError!, /still holds the previous cred/);
    assert.ok(log.lines.some((l) => l.startsWith("error: ") && /cotal doctor auth --fix/.test(l)));
    assert.equal(daemon.status().credential.adoptions, 0);
  } finally {
    await daemon.stop();
    await s.broker.stop();
  }
});

Deno.test("delivery - an injected store excludes --creds, and a missing cred names its per-space key", async () => {
  const store = new MemorySecretStore();
  await assert.rejects(
    runDelivery({ values: { creds: "/tmp/x.creds" }, positionals: [], raw: [] }, store),
    (err: Error & { code?: string }) => err.code === "cred_source_conflict",
  );
  await assert.rejects(
    runDelivery(
      { values: { space: "s1", server: "nats://127.0.0.1:1" }, positionals: [], raw: [] },
      store,
    ),
    (err: Error & { code?: string }) =>
      err.code === "missing_delivery_cred" &&
      err.message.includes(deliveryCredsKey("s1", { injected: true })),
  );
  await assert.rejects(
    runDelivery({ values: { server: "nats://127.0.0.1:1" }, positionals: [], raw: [] }, store),
    (err: Error & { code?: string }) => err.code === "missing_space",
  );
  await assert.rejects(
    runDelivery({ values: { space: "s1" }, positionals: [], raw: [] }),
    (err: Error & { code?: string }) => err.code === "no_cred_source",
  );
});

Deno.test("delivery - a lease taken over under it makes the daemon go quiet and exit without releasing", async () => {
  const s = await space(600);
  const log = capture();
  const daemon = await runDelivery(
    { values: { space: s.name, server: s.broker.url }, positionals: [], raw: [] },
    s.store,
    { log },
  );
  const creds = (await s.store.get(deliveryCredsKey(s.name, { injected: true })))!;
  const nc = await connectAs(s.broker.url, creds);
  try {
    assert.equal(daemon.status().ready, true);
    const kv = await nc.jetstream().views.kv(`cotal_delivery_${s.name}`, { bindOnly: true });
    const foreign = { holder: "local.usurper", incarnation: "x", since: Date.now(), ready: true };
    await kv.put("lease.0", JSON.stringify(foreign));
    const exit = await daemon.closed;
    assert.equal(exit.code, 1);
    assert.match(exit.reason, /lost the delivery lease/);
    assert.equal(daemon.status().ready, false);
    // The successor's row survives: a lost lease is never released.
    const row = await kv.get("lease.0");
    assert.equal(JSON.parse(new TextDecoder().decode(row!.value)).holder, "local.usurper");
  } finally {
    await nc.close();
    await daemon.stop();
    await s.broker.stop();
  }
});
