/**
 * A member flooding the delivery daemon's request rail with `readHistory` (each one a few bytes
 * that make consumers on CHAT and pull a page of posts on the daemon's connection) gets
 * `delivery_busy` past its one read in progress, and another member's request is answered
 * (red team 8's U).
 */
import assert from "node:assert/strict";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { HISTORY_READ_RATE, HISTORY_READS_IN_FLIGHT } from "../../lib/delivery/constants.ts";
import { isCotalError } from "../../lib/errors.ts";
import { connectAs, post, startDaemonProcess, startDeliverySpace } from "./_helpers.ts";

Deno.test("delivery - a flood of readHistory requests from one member is answered busy past its share; others are still served", async () => {
  await using s = await startDeliverySpace({ prefix: "raillim" });
  const daemon = startDaemonProcess(s);
  const alice = await s.agent("alice");
  const mallory = await s.agent("mallory");
  const an = await connectAs(s.url, alice.creds);
  const mn = await connectAs(s.url, mallory.creds);
  try {
    await daemon.waitForLine(/delivery daemon up/);
    for (let i = 0; i < 50; i++) await post(an, s.space, alice, "general", "x".repeat(60_000));
    // 60 requests at once, each asking for a full page of the largest posts.
    const flood = await Promise.allSettled(
      Array.from(
        { length: 60 },
        () =>
          deliveryRequest(mn, s.space, mallory.principal, "readHistory", {
            channel: "general",
            limit: 200,
          }),
      ),
    );
    const busy = flood.filter((r) =>
      r.status === "rejected" && isCotalError(r.reason, "delivery_busy")
    );
    const served = flood.filter((r) => r.status === "fulfilled");
    const other = flood.filter((r) =>
      r.status === "rejected" && !isCotalError(r.reason, "delivery_busy")
    );
    assert.deepEqual(other.map((r) => String((r as PromiseRejectedResult).reason)), []);
    // One history read per caller at a time (red team 8: floods of them got the daemon's
    // connection cut as a slow consumer 134 times in 15 minutes).
    assert.equal(HISTORY_READS_IN_FLIGHT.perCaller, 1);
    assert.ok(busy.length >= 50, `busy: ${busy.length}`);
    assert.ok(served.length >= 1, `served: ${served.length}`);
    assert.match(
      String((busy[0] as PromiseRejectedResult).reason.message),
      /1 of your history reads is in progress; send the next when it is answered/,
    );
    // Another member is served meanwhile, and the flooder again once its requests are answered.
    const page = await deliveryRequest(an, s.space, alice.principal, "readHistory", {
      channel: "general",
      limit: 5,
    });
    assert.equal((page.messages as unknown[]).length, 5);
    const again = await deliveryRequest(mn, s.space, mallory.principal, "readHistory", {
      channel: "general",
      limit: 1,
    });
    assert.equal((again.messages as unknown[]).length, 1);
  } finally {
    await an.close();
    await mn.close();
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("delivery - history reads one after another are rated per member past a burst; another member is still served", async () => {
  // One read at a time per caller bounded the daemon's memory, not its time: members reading
  // in a loop kept the daemon's eight read slots full (red team 31's attempt 8).
  await using s = await startDeliverySpace({ prefix: "railrate" });
  const daemon = startDaemonProcess(s);
  const alice = await s.agent("alice");
  const mallory = await s.agent("mallory");
  const an = await connectAs(s.url, alice.creds);
  const mn = await connectAs(s.url, mallory.creds);
  try {
    await daemon.waitForLine(/delivery daemon up/);
    await post(an, s.space, alice, "general", "hello");
    const read = (nc: typeof an, who: typeof alice) =>
      deliveryRequest(nc, s.space, who.principal, "readHistory", { channel: "general", limit: 1 });
    let served = 0;
    let refusal: unknown;
    // Sequential: never more than one in progress, so only the rate can refuse.
    for (let i = 0; i < HISTORY_READ_RATE.burst * 2 && refusal === undefined; i++) {
      await read(mn, mallory).then(() => served++, (err) => (refusal = err));
    }
    assert.ok(isCotalError(refusal, "delivery_busy"), String(refusal));
    assert.match((refusal as Error).message, /You read history faster than 2 pages a second/);
    // The burst, and at most a few refilled while it was spent.
    assert.ok(
      served >= HISTORY_READ_RATE.burst && served < HISTORY_READ_RATE.burst * 2,
      `${served}`,
    );
    const page = await read(an, alice);
    assert.equal((page.messages as unknown[]).length, 1);
  } finally {
    await an.close();
    await mn.close();
    daemon.kill();
    await daemon.exited;
  }
});
