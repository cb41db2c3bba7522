/**
 * The delivery daemon's `health` answer on its admin rail, what `cotal status` reads to show a
 * stall its process state never would (newcomer pass 5: fan-out failed for hours while status
 * said "running"). Here DLV is taken away under the fan-out: every copy it makes fails,
 * and the daemon says since when and why; the first copy that lands clears it.
 */
import assert from "node:assert/strict";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { setupSpaceStreams, streamNames } from "../../lib/wire/mod.ts";
import { waitFor } from "../_harness/broker.ts";
import { connectAs, post, startDaemonProcess, startDeliverySpace } from "./_helpers.ts";

const OPERATOR = { owner: "local", actor: "operator" };

Deno.test("delivery - health says since when a loop has only failed and why, and a success clears it", async () => {
  await using s = await startDeliverySpace({ prefix: "health" });
  const daemon = startDaemonProcess(s);
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  const ctl = await connectAs(s.url, await s.mint("control-caller", { principal: OPERATOR }));
  const health = () =>
    deliveryRequest(ctl, s.space, OPERATOR, "health", {}, { service: "delivery-admin" }) as Promise<
      { ready: boolean; stalledSince?: number; lastError?: string }
    >;
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    const fine = await health();
    assert.equal(fine.ready, true);
    assert.equal(fine.stalledSince, undefined);
    // Bob's copies have nowhere to go (his ACL row is known: the fan-out writes his DLV
    // subject itself): every fan-out of a post to general fails.
    const teardown = await connectAs(s.url, await s.mint("teardown"));
    await (await teardown.jetstreamManager()).streams.delete(streamNames(s.space).dlv);
    await teardown.close();
    await post(an, s.space, alice, "general", "into the void");
    let h = await health();
    await waitFor(async () => (h = await health()).stalledSince !== undefined, {
      what: "the daemon to say it is stalled",
      timeoutMs: 20_000,
    });
    assert.match(h.lastError!, /^fan-out: /);
    assert.ok(h.stalledSince! <= Date.now());
    // DLV back: the redelivered post is copied, and the stall is gone.
    await setupSpaceStreams({ servers: s.url, space: s.space, creds: await s.mint("provisioner") });
    await waitFor(async () => (await health()).stalledSince === undefined, {
      what: "the stall cleared by a success",
      timeoutMs: 30_000,
    });
  } catch (e) {
    console.error(daemon.stderr().slice(-2000));
    throw e;
  } finally {
    for (const c of [an, bn, ctl]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
