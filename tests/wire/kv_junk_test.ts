/**
 * `purgeJunkRows`, what a bucket's owner runs when its bucket is full of rows it never wrote
 * (broker answers a member aimed at made-up keys): on a real broker, the junk goes, rows the
 * owner takes for its own stay, and a write refused for a full bucket is recognised.
 */
import assert from "node:assert/strict";
import { connect, headers } from "nats";
import { isStoreFull, purgeJunkRows } from "../../lib/wire/kv.ts";
import { startTestBroker } from "../_harness/broker.ts";

Deno.test("kv - purgeJunkRows clears rows the owner does not take, keeps its own, and a full bucket's refusal is told apart", async () => {
  await using broker = await startTestBroker();
  const nc = await connect({ servers: broker.url });
  try {
    const kv = await nc.jetstream().views.kv("records", { history: 1, max_bytes: 64 * 1024 });
    const enc = new TextEncoder();
    await kv.put("dead.a", enc.encode(JSON.stringify({ at: 1 })));
    await kv.put("gap.b", enc.encode(JSON.stringify({ version: 1 })));
    // Junk as a member leaves it: a status line (stored with its header on 2.10), and API
    // answers, until the bucket refuses more.
    nc.publish("$KV.records.dead.x", new Uint8Array(), { headers: headers(404, "No Messages") });
    let full: unknown;
    for (let i = 0; i < 1000 && !full; i++) {
      await kv.put(`dead.j${i}`, enc.encode(JSON.stringify({ type: "api", pad: "x".repeat(200) })))
        .catch((err) => full = err);
    }
    assert.ok(full, "the bucket filled");
    assert.equal(isStoreFull(full), true);
    assert.equal(isStoreFull(new Error("wrong last sequence")), false);
    const isRecord = (_k: string, v: Uint8Array) => {
      try {
        const o = JSON.parse(new TextDecoder().decode(v));
        return o.version === 1 || typeof o.at === "number";
      } catch {
        return false;
      }
    };
    const purged = await purgeJunkRows(nc, "records", ">", isRecord);
    assert.ok(purged > 100, `purged ${purged}`);
    const jsm = await nc.jetstreamManager();
    const left = Object.keys(
      (await jsm.streams.info("KV_records", { subjects_filter: "$KV.records.>" })).state
        .subjects ?? {},
    ).sort();
    assert.deepEqual(left, ["$KV.records.dead.a", "$KV.records.gap.b"]);
    // Room again.
    await kv.put("dead.c", enc.encode(JSON.stringify({ at: 2 })));
  } finally {
    await nc.close();
  }
});
