/**
 * The daemon's own durables deleted under it (an operator's `nats consumer rm` with a daemon
 * cred, a consumer janitor gone wrong): the fan-out and the reader come back by themselves, and posts made
 * after the deletion still reach an offline member's DLV. Before, the pull loop ended with
 * "the consumer stopped" and the daemon went on reporting ready while copying nothing.
 */
import assert from "node:assert/strict";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { consumerInfo, streamNames } from "../../lib/wire/mod.ts";
import { waitFor } from "../_harness/broker.ts";
import { connectAs, drainDlv, post, startDaemonProcess, startDeliverySpace } from "./_helpers.ts";

Deno.test("delivery - its fan-out and reader durables deleted while it serves come back, and copies go on", async () => {
  await using s = await startDeliverySpace({ prefix: "durheal" });
  const daemon = startDaemonProcess(s);
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  const admin = await connectAs(s.url, await s.mint("delivery"));
  const names = streamNames(s.space);
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    const before = await post(an, s.space, alice, "general", "before");
    assert.deepEqual(
      (await drainDlv(bn, s.space, bob, { until: 1 })).messages.map((m) => m.id),
      [before.id],
    );

    const jsm = await admin.jetstreamManager();
    await jsm.consumers.delete(names.chat, "fanout");
    await jsm.consumers.delete(names.inbox, "reader");
    const after = [];
    for (let i = 0; i < 3; i++) after.push((await post(an, s.space, alice, "general", `a${i}`)).id);

    await waitFor(
      async () =>
        !!(await consumerInfo(jsm, names.chat, "fanout")) &&
        !!(await consumerInfo(jsm, names.inbox, "reader")),
      { what: "the fan-out and reader durables back", timeoutMs: 30_000 },
    );
    const got = await drainDlv(bn, s.space, bob, { until: 3, timeoutMs: 30_000 });
    assert.deepEqual(got.messages.map((m) => m.id).sort(), after.sort());
    assert.match(daemon.stderr(), /fan-out: .*(deleted|gone|recreat)/i);
  } catch (e) {
    console.error(daemon.stderr().slice(-3000));
    throw e;
  } finally {
    for (const c of [an, bn, admin]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
