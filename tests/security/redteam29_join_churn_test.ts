/**
 * Red team 29, attempt 4: an agent with an ordinary read grant on #general joined and left it
 * durably in a tight loop on its own delivery rail, about 80 cycles a second. Each change writes
 * a members row, recreates a consumer filter and wakes the membership feed, so one agent held
 * 30 % of a core across the delivery daemon, the broker and the supervisor for as long as it
 * liked. A member's joins and leaves are now rated (MEMBERSHIP_CHANGE_RATE): past the burst
 * they are answered `delivery_busy`, and another member's join is served meanwhile.
 */
import assert from "node:assert/strict";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { MEMBERSHIP_CHANGE_RATE } from "../../lib/delivery/constants.ts";
import { isCotalError } from "../../lib/errors.ts";
import { CotalEndpoint } from "../../lib/endpoint/mod.ts";
import { waitFor } from "../_harness/broker.ts";
import { connectAs, startDaemonProcess, startDeliverySpace } from "../delivery/_helpers.ts";

Deno.test("red team 29 - a member's durable join-leave churn is rated; another member still joins", async () => {
  await using s = await startDeliverySpace({ prefix: "rt29churn" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory", { allowSubscribe: ["general", "side"] });
  const alice = await s.agent("alice", { allowSubscribe: ["general"] });
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  try {
    await daemon.waitForLine(/delivery daemon up/);
    const ask = (op: string, body: Record<string, unknown>) =>
      deliveryRequest(mn, s.space, mallory.principal, op, body).then(
        (r) => ({ ok: true as const, r }),
        (e) => ({ ok: false as const, e }),
      );
    const cycles = MEMBERSHIP_CHANGE_RATE.burst; // twice the burst in changes
    const started = Date.now();
    let served = 0;
    let busy: unknown;
    for (let i = 0; i < cycles; i++) {
      const j = await ask("durableJoin", { channel: "general" });
      if (j.ok) {
        served++;
        const l = await ask("durableLeave", {
          channel: "general",
          generation: j.r.generation,
          lifecycleUid: mallory.uid,
        });
        if (l.ok) served++;
        else busy ??= l.e;
      } else busy ??= j.e;
    }
    const seconds = (Date.now() - started) / 1000;
    // What the rate allows over the time the loop took, and not one change more.
    const allowed = MEMBERSHIP_CHANGE_RATE.burst +
      Math.ceil(seconds * MEMBERSHIP_CHANGE_RATE.perSecond);
    assert.ok(
      served <= allowed,
      `${served} changes served in ${seconds} s; the rate allows ${allowed}`,
    );
    assert.ok(isCotalError(busy, "delivery_busy"), String(busy));
    assert.match((busy as Error).message, /faster than 2 a second .*ask again in a second/);
    // Alice's share is her own.
    const hers = await deliveryRequest(an, s.space, alice.principal, "durableJoin", {
      channel: "general",
    });
    assert.equal(hers.durable, true);

    // An honest endpoint of the same member that meets the rate is given its backstop when it
    // asks again, as when the daemon does not answer.
    const ep = new CotalEndpoint({
      servers: s.url,
      space: s.space,
      card: { name: mallory.name },
      lifecycleUid: mallory.uid,
      creds: mallory.creds,
    });
    await ep.start();
    try {
      while ((await ask("durableJoin", { channel: "general" })).ok) { /* spend the budget */ }
      const joined = await ep.joinChannel("side");
      assert.equal(joined.durable, false, JSON.stringify(joined));
      assert.match(String(joined.reason), /faster than 2 a second/);
      await waitFor(async () => {
        const r = await deliveryRequest(mn, s.space, mallory.principal, "listMemberships", {
          lifecycleUid: mallory.uid,
        });
        return (r.memberships as { channel: string }[]).some((m) => m.channel === "side");
      }, { what: "the side channel's backstop, asked again", timeoutMs: 20_000 });
    } finally {
      await ep.stop();
    }
  } finally {
    await mn.close();
    await an.close();
    daemon.kill();
    await daemon.exited;
  }
});
