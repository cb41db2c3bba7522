/**
 * The delivery daemon outlives its broker: a broker killed for longer than any old deadline, or
 * not up yet when the daemon starts, is waited for, and the daemon serves again when it is
 * back, losing nothing the broker acknowledged.
 */
import assert from "node:assert/strict";
import { waitFor } from "../_harness/broker.ts";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { connectAs, dlvCount, post, startDaemonProcess, startDeliverySpace } from "./_helpers.ts";

Deno.test("delivery - the broker killed for 16 s and restarted: the daemon waits, then serves; nothing lost", async () => {
  await using s = await startDeliverySpace({ prefix: "outage" });
  const daemon = startDaemonProcess(s);
  let alive = true;
  daemon.exited.then(() => alive = false);
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  try {
    await daemon.waitForLine(/delivery daemon up/);
    let an = await connectAs(s.url, alice.creds);
    let bn = await connectAs(s.url, bob.creds);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    for (let i = 0; i < 20; i++) await post(an, s.space, alice, "general", `before ${i}`);
    await waitFor(async () => await dlvCount(bn, s.space, bob) === 20, {
      what: "the first 20 copies",
    });
    await an.close().catch(() => {});
    await bn.close().catch(() => {});

    await s.killBroker();
    // Longer than the 15 s after which the daemon used to give up and exit.
    await new Promise((r) => setTimeout(r, 16_000));
    assert.ok(alive, `the daemon exited while the broker was down:\n${daemon.stderr()}`);
    await s.startBroker();

    an = await connectAs(s.url, alice.creds);
    bn = await connectAs(s.url, bob.creds);
    try {
      for (let i = 0; i < 20; i++) await post(an, s.space, alice, "general", `after ${i}`);
      await waitFor(async () => await dlvCount(bn, s.space, bob) === 40, {
        what: "all 40 copies after the restart",
        timeoutMs: 30_000,
      }).catch((err) => {
        throw new Error(`${err.message}\n${daemon.stderr()}`);
      });
      assert.ok(alive);
      assert.match(daemon.stderr(), /broker connection lost; reconnecting until it is back/);
    } finally {
      await an.close();
      await bn.close();
    }
  } finally {
    daemon.kill();
    const st = await daemon.exited;
    assert.equal(st.code, 0, daemon.stderr());
  }
});

Deno.test("delivery - started before its broker is up, the daemon waits for it and comes up", async () => {
  await using s = await startDeliverySpace({ prefix: "early" });
  await s.killBroker();
  const daemon = startDaemonProcess(s);
  try {
    await daemon.waitForLine(/the broker is not up \(.*\); waiting for it/);
    await s.startBroker();
    await daemon.waitForLine(/delivery daemon up/, 30_000);
  } finally {
    daemon.kill();
    const st = await daemon.exited;
    assert.equal(st.code, 0, daemon.stderr());
  }
});
