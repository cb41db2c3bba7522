/**
 * The copy path: a member whose ACL row the daemon knows gets its copies written straight to
 * DLV by the fan-out (one broker write per copy, no INBOX entry); a member whose row is not
 * there yet gets INBOX entries, which the reader copies once the row is back. Either way a copy
 * is stored once, under the same copy id.
 */
import assert from "node:assert/strict";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { CotalEndpoint, type CotalMessageEvent } from "../../lib/endpoint/mod.ts";
import { aclKey, bindKv, bucketNames, streamNames } from "../../lib/wire/mod.ts";
import { waitFor } from "../_harness/broker.ts";
import {
  connectAs,
  dlvCount,
  drainDlv,
  post,
  startDaemonProcess,
  startDeliverySpace,
  waitSettled,
} from "./_helpers.ts";

Deno.test("delivery - a known member's copies go straight to DLV; an unknown one's wait in INBOX for its ACL row", async () => {
  await using s = await startDeliverySpace({ prefix: "copypath" });
  const daemon = startDaemonProcess(s);
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  const admin = await connectAs(s.url, await s.mint("provisioner"));
  const names = streamNames(s.space);
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    const jsm = await admin.jetstreamManager();
    const inboxSeq = async () => (await jsm.streams.info(names.inbox)).state.last_seq;

    const direct = [];
    for (let i = 0; i < 5; i++) {
      direct.push((await post(an, s.space, alice, "general", `d${i}`)).id);
    }
    await waitSettled(s);
    await waitFor(async () => await dlvCount(bn, s.space, bob) >= 5, { what: "bob's 5 copies" });
    assert.equal(await inboxSeq(), 0, "a copy for a known member went through INBOX");

    // Bob's ACL row gone for a while (unknown is not "no"): his copies wait in INBOX.
    const kv = await bindKv(admin, bucketNames(s.space).acl);
    const key = aclKey(bob.principal, bob.uid);
    const row = (await kv.get(key))!.value;
    await kv.delete(key);
    await waitFor(async () => (await kv.get(key))?.operation === "DEL", { what: "the row gone" });
    await new Promise((r) => setTimeout(r, 500));
    const waiting = [];
    for (let i = 0; i < 3; i++) {
      waiting.push((await post(an, s.space, alice, "general", `w${i}`)).id);
    }
    await waitFor(async () => await inboxSeq() >= 3, { what: "3 INBOX entries for bob" });
    await kv.put(key, row);
    await waitFor(async () => await dlvCount(bn, s.space, bob) >= 8, {
      what: "the waiting copies delivered once the row is back",
      timeoutMs: 30_000,
    });
    const got = await drainDlv(bn, s.space, bob, { until: 8, timeoutMs: 20_000 });
    assert.deepEqual(got.messages.map((m) => m.id).sort(), [...direct, ...waiting].sort());
  } catch (e) {
    console.error(daemon.stderr().slice(-2000));
    throw e;
  } finally {
    for (const c of [an, bn, admin]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("delivery - an endpoint that settles copies itself (dedupeDurable: false) gets the durable copies its join backfill showed", async () => {
  await using s = await startDeliverySpace({ prefix: "histdur" });
  const daemon = startDaemonProcess(s);
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  const endpoints: CotalEndpoint[] = [];
  const endpoint = (opts: { dedupeDurable?: boolean } = {}) => {
    const ep = new CotalEndpoint({
      servers: s.url,
      space: s.space,
      card: { name: bob.name },
      lifecycleUid: bob.uid,
      creds: bob.creds,
      channels: ["general"],
      ...opts,
    });
    endpoints.push(ep);
    return ep;
  };
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    const sent = [];
    for (let i = 0; i < 3; i++) sent.push((await post(an, s.space, alice, "general", `p${i}`)).id);
    await waitFor(async () => await dlvCount(bn, s.space, bob) >= 3, { what: "bob's copies" });
    // Fault pass 9: a cotal mcp was killed holding these copies unacked (in flight), and the next
    // one joined general first: its backfill showed the posts, which cotal mcp drops as history,
    // and marked them seen; the durable copies redelivered after the ack wait were then settled
    // as already handled, and lost to bob.
    const first = endpoint({ dedupeDurable: false });
    let held = 0;
    first.addEventListener("message", (e) => {
      const ev = e as CotalMessageEvent;
      if (ev.meta.source !== "durable") return;
      ev.preventDefault(); // kept, never settled: in flight when it goes
      held++;
    });
    await first.start();
    await waitFor(() => held >= 3, { what: "the copies in flight" });
    await first.stop();
    const b = endpoint({ dedupeDurable: false });
    const got: CotalMessageEvent[] = [];
    b.addEventListener("message", (e) => void got.push(e as CotalMessageEvent));
    await b.start();
    await waitFor(() => got.filter((e) => !e.meta.historical).length >= 3, {
      what: "the durable copies, redelivered after the ack wait",
      timeoutMs: 90_000,
    });
    const delivered = got.filter((e) => !e.meta.historical);
    assert.deepEqual(delivered.map((e) => e.message.id).sort(), [...sent].sort());
    assert.ok(delivered.every((e) => e.meta.source === "durable"));
    assert.ok(got.some((e) => e.meta.historical), "the backfill showed them first");
    await b.stop();
    // The default (history counts as seen): each id surfaces once.
    for (let i = 0; i < 3; i++) sent.push((await post(an, s.space, alice, "general", `q${i}`)).id);
    await waitFor(async () => await dlvCount(bn, s.space, bob) >= 3, { what: "the next copies" });
    const c = endpoint();
    const once: CotalMessageEvent[] = [];
    c.addEventListener("message", (e) => void once.push(e as CotalMessageEvent));
    await c.start();
    await waitFor(async () => await dlvCount(bn, s.space, bob) === 0, {
      what: "the copies settled",
      timeoutMs: 20_000,
    });
    assert.equal(new Set(once.map((e) => e.message.id)).size, once.length, "an id surfaced twice");
  } catch (e) {
    console.error(daemon.stderr().slice(-2000));
    throw e;
  } finally {
    for (const ep of endpoints) await ep.stop().catch(() => {});
    for (const c of [an, bn]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
