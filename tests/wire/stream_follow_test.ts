/**
 * The stream follower (lib/wire/stream_follow.ts) and the delivery daemon's bucket mirror built
 * on it, on a real broker: every stored row is seen in order as stored (status lines and
 * header bytes npm:nats cannot parse included), a broker restart is survived without a row
 * missed, and a freshness barrier whose last sequence was purged still resolves.
 */
import assert from "node:assert/strict";
import { connect, headers, type NatsConnection } from "nats";
import { LEASE_KEY } from "../../lib/delivery/constants.ts";
import { KvMirror } from "../../lib/delivery/kv_mirror.ts";
import { DeliveryLease } from "../../lib/delivery/lease.ts";
import { UNDECODABLE } from "../../lib/nats/headers.ts";
import { type FollowedMessage, followStream } from "../../lib/wire/stream_follow.ts";
import { startTestBroker, waitFor } from "../_harness/broker.ts";
import { badHeaders } from "../security/_rt19c.ts";

const enc = new TextEncoder();

async function bucket(nc: NatsConnection, name: string) {
  return await nc.jetstream().views.kv(name, { history: 1 });
}

Deno.test("stream follow - every stored row in order, a status line and unreadable headers included", async () => {
  await using broker = await startTestBroker();
  const nc = await connect({ servers: broker.url });
  try {
    const kv = await bucket(nc, "rows");
    await kv.put("a", enc.encode("1"));
    // What a member can make the broker store: a status line, and a header block npm:nats
    // throws on when it reads it.
    nc.publish("$KV.rows.b", new Uint8Array(), { headers: headers(404, "No Messages") });
    nc.publish("$KV.rows.c", enc.encode("x"), { headers: badHeaders() });
    await nc.flush();
    const seen: FollowedMessage[] = [];
    const f = await followStream(nc, {
      stream: "KV_rows",
      filter: "$KV.rows.>",
      onMessage: (m) => seen.push(m),
    });
    try {
      await waitFor(() => seen.length === 3, { what: "the three rows as they stand" });
      await kv.put("d", enc.encode("2"));
      await waitFor(() => seen.length === 4, { what: "the write after the start" });
      assert.deepEqual(seen.map((m) => m.subject), [
        "$KV.rows.a",
        "$KV.rows.b",
        "$KV.rows.c",
        "$KV.rows.d",
      ]);
      assert.deepEqual(seen.map((m) => m.seq), [1, 2, 3, 4]);
      // nats-server 2.10 stores the status line with the row, 2.11+ without: either way the
      // row is delivered as stored.
      assert.equal(seen[1].data.length, 0);
      assert.equal(seen[2].headers, UNDECODABLE);
      assert.equal(f.lastSeq, 4);
      assert.equal(await f.drained(), true);
    } finally {
      f.stop();
    }
  } finally {
    await nc.close();
  }
});

Deno.test("stream follow - a broker restart takes the consumer; the follower recreates it and misses no row", async () => {
  const first = await startTestBroker();
  let broker = first;
  const nc = await connect({
    servers: broker.url,
    reconnectTimeWait: 100,
    maxReconnectAttempts: -1,
  });
  try {
    const kv = await bucket(nc, "rows");
    const jsm = await nc.jetstreamManager();
    await kv.put("a", enc.encode("1"));
    const seen: number[] = [];
    const resets: string[] = [];
    const f = await followStream(nc, {
      stream: "KV_rows",
      filter: "$KV.rows.>",
      onMessage: (m) => seen.push(m.seq),
      onReset: (why) => resets.push(why),
    });
    try {
      await waitFor(() => seen.length === 1, { what: "the first row" });
      await broker.process.stop();
      broker = await startTestBroker({ port: first.port, storeDir: first.storeDir });
      await waitFor(async () => {
        try {
          await jsm.streams.info("KV_rows");
          return true;
        } catch {
          return false;
        }
      }, { what: "JetStream back after the restart", timeoutMs: 20_000 });
      await kv.put("b", enc.encode("2"));
      await kv.put("c", enc.encode("3"));
      await waitFor(() => seen.length === 3, {
        what: "the rows written after the restart",
        timeoutMs: 30_000,
      });
      assert.deepEqual(seen, [1, 2, 3]);
      assert.ok(resets.length >= 1, "the consumer was recreated");
    } finally {
      f.stop();
    }
  } finally {
    await nc.close();
    await broker.stop();
    await first.stop();
  }
});

function decodeJson(_k: string, v: Uint8Array): { v: number } | undefined {
  try {
    return JSON.parse(new TextDecoder().decode(v));
  } catch {
    return undefined;
  }
}

Deno.test("kv mirror - a status row aimed at a key is no change: the last good value stands", async () => {
  await using broker = await startTestBroker();
  const nc = await connect({ servers: broker.url });
  try {
    const kv = await bucket(nc, "acl");
    await kv.put("alice", enc.encode('{"v":1}'));
    const m = await KvMirror.start(nc, { bucket: "acl", decode: decodeJson });
    try {
      assert.equal(m.get("alice")?.value.v, 1);
      nc.publish("$KV.acl.alice", new Uint8Array(), { headers: headers(404, "No Messages") });
      await nc.flush();
      await m.sync();
      assert.equal(m.get("alice")?.value.v, 1);
      assert.equal(m.undecodable, 1);
      await kv.put("alice", enc.encode('{"v":3}'));
      await m.sync();
      assert.equal(m.get("alice")?.value.v, 3);
    } finally {
      m.stop();
    }
  } finally {
    await nc.close();
  }
});

Deno.test("kv mirror - the stream's last sequence is a purged row no consumer delivers: start and sync still resolve", async () => {
  await using broker = await startTestBroker();
  const nc = await connect({ servers: broker.url });
  try {
    const kv = await bucket(nc, "members");
    await kv.put("alice", enc.encode('{"v":1}'));
    await kv.put("bob", enc.encode('{"v":2}'));
    // An ended member's row goes whole; the stream's last sequence still names it.
    const jsm = await nc.jetstreamManager();
    await jsm.streams.purge("KV_members", { filter: "$KV.members.bob" });
    assert.equal((await jsm.streams.info("KV_members")).state.last_seq, 2);
    const m = await KvMirror.start(nc, { bucket: "members", decode: decodeJson });
    try {
      assert.equal(m.get("alice")?.value.v, 1);
      assert.equal(m.get("bob"), undefined);
      await m.sync();
    } finally {
      m.stop();
    }
  } finally {
    await nc.close();
  }
});

Deno.test("delivery lease watch - a status line aimed at the lease key does not end the watch", async () => {
  await using broker = await startTestBroker();
  const nc = await connect({ servers: broker.url });
  try {
    const kv = await nc.jetstream().views.kv("lease", { history: 1, ttl: 30_000 });
    const ours = await DeliveryLease.bind(nc, "lease", "local.d1", "inc-1");
    assert.equal(await ours.acquire(), true);
    let foreign = 0;
    await ours.watch(() => foreign++);
    try {
      assert.equal(await ours.write(), true);
      nc.publish(`$KV.lease.${LEASE_KEY}`, new Uint8Array(), {
        headers: headers(404, "No Messages"),
      });
      await nc.flush();
      await waitFor(() => foreign === 1, { what: "the aimed row reported as foreign" });
      const other = { holder: "local.d2", incarnation: "inc-2", since: Date.now(), ready: true };
      await kv.put(LEASE_KEY, enc.encode(JSON.stringify(other)));
      await waitFor(() => foreign === 2, { what: "another holder's row reported after it" });
    } finally {
      ours.stopWatch();
    }
  } finally {
    await nc.close();
  }
});
