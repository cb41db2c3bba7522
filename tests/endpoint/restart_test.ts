import assert from "node:assert/strict";
import { waitFor } from "../_harness/broker.ts";
import type { CotalMessageEvent, TransportEvent } from "../../lib/endpoint/mod.ts";
import { collect, startMesh } from "./_mesh.ts";
import { startRelay } from "./_proxy.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { bucketNames, connectBroker, kvStreamName, setupSpaceStreams } from "../../lib/wire/mod.ts";

const policy = { subscribe: ["general"], allowPublish: ["general"] };

Deno.test("endpoint - after a broker restart it reconnects; DMs sent while it was away come from its durable", async () => {
  await using mesh = await startMesh();
  const alice = await mesh.agent("alice", policy);
  const bob = await mesh.agent("bob", policy);
  // Bob reaches the broker through a relay we can hold shut, so he is away longer than alice.
  const relay = startRelay(mesh.broker.port);
  try {
    const b = bob.endpoint({ servers: relay.url });
    const a = alice.endpoint();
    const got = collect<CotalMessageEvent>(b, "message");
    const transport = collect<TransportEvent>(b, "transport");
    const conn = collect<Event & { connected: boolean }>(b, "connection");
    await b.start();
    await a.start();
    const before = await a.unicast(bob.id, "before");
    await waitFor(() => got.length === 1, { what: "the first DM" });

    relay.pause();
    await mesh.restart();
    // Alice is back (her publishes are acknowledged by the restarted broker); bob is not.
    const dms: string[] = [];
    const posts: string[] = [];
    for (let i = 0; i < 5; i++) dms.push((await a.unicast(bob.id, `while away ${i}`)).id);
    for (let i = 0; i < 3; i++) posts.push((await a.multicast(`post ${i}`)).id);
    assert.ok(transport.some((t) => !t.connected), "bob saw the transport drop");
    assert.equal(got.length, 1);

    relay.resume();
    await waitFor(() => got.length === 1 + dms.length + posts.length, {
      what: "what was sent while bob was away",
      timeoutMs: 20_000,
    });
    const ids = (kind: string) => got.filter((e) => e.meta.kind === kind).map((e) => e.message.id);
    assert.deepEqual(ids("dm"), [before.id, ...dms]);
    assert.ok(got.filter((e) => e.meta.kind === "dm").every((e) => e.meta.source === "dm"));
    // Channel posts missed while away are recovered from the stream, not re-backfilled.
    assert.deepEqual(ids("channel"), posts);
    assert.ok(got.filter((e) => e.meta.kind === "channel").every((e) => e.meta.source === "gap"));
    assert.ok(transport.at(-1)!.connected);
    // The library reconnect kept the endpoint bound: no rebuild was needed.
    assert.deepEqual(conn.map((c) => c.connected), [true]);
    // And it works live again.
    const after = await a.unicast(bob.id, "after");
    await waitFor(() => got.some((e) => e.message.id === after.id), { what: "a live DM" });
  } finally {
    await relay.close();
  }
});

Deno.test("endpoint - a rebuild is serialized and reopens subscriptions without re-backfilling", async () => {
  await using mesh = await startMesh();
  const alice = await mesh.agent("alice", policy);
  const bob = await mesh.agent("bob", policy);
  const a = alice.endpoint();
  await a.start();
  for (let i = 0; i < 3; i++) await a.multicast(`old ${i}`);
  const b = bob.endpoint();
  const got = collect<CotalMessageEvent>(b, "message");
  const conn = collect<Event & { connected: boolean }>(b, "connection");
  await b.start();
  await waitFor(() => got.length === 3, { what: "the backfill" });

  // Two concurrent rebuild requests share one rebuild.
  await Promise.all([b.reconnect(), b.reconnect()]);
  assert.deepEqual(conn.map((c) => c.connected), [true, false, true]);
  assert.deepEqual(b.joinedChannels(), ["general"]);
  const live = await a.multicast("after the rebuild");
  const dm = await a.unicast(bob.id, "dm after the rebuild");
  await waitFor(() => got.length >= 5, { what: "live traffic after the rebuild" });
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(got.slice(3).map((e) => e.message.id).sort(), [live.id, dm.id].sort());
  assert.equal(got.filter((e) => e.meta.historical).length, 3, "history was not replayed again");
});

Deno.test("endpoint - started while the presence bucket is gone (a broker restart), it binds presence once the bucket is back", async () => {
  await using mesh = await startMesh();
  const bob = await mesh.agent("bob", policy);
  const admin = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "teardown"),
  });
  try {
    // The memory-backed presence bucket is gone until the supervisor puts it back.
    const jsm = await admin.jetstreamManager();
    await jsm.streams.delete(kvStreamName(bucketNames(mesh.space).presence));
    const b = bob.endpoint();
    const warned = collect<Event & { error: Error }>(b, "warning");
    await b.start();
    assert.ok(warned.some((w) => /does not exist/.test(w.error.message)));
    await setupSpaceStreams({
      servers: mesh.url,
      creds: await mesh.provisioner(),
      space: mesh.space,
    });
    // Fault pass 9: it never tried again, and its spawn failed its readiness.
    await waitFor(() => b.getRoster().some((p) => p.card.id === bob.id), {
      what: "bob's own presence row, once the bucket is back",
      timeoutMs: 15_000,
    });
    assert.equal(warned.filter((w) => /does not exist/.test(w.error.message)).length, 1);
  } finally {
    await admin.close();
  }
});
