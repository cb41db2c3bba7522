/**
 * The copy path: a member whose ACL row the daemon knows gets its copies written straight to
 * DLV by the fan-out (one broker write per copy, no INBOX entry); a member whose row is not
 * there yet gets INBOX entries, which the reader copies once the row is back. Either way a copy
 * is stored once, under the same copy id.
 */
import assert from "node:assert/strict";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
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
