/**
 * Red team 20b: the delivery daemon's mirror of the channel registry takes any JSON object as a
 * channel's config (`decodeJson` in lib/delivery/boot.ts), and a broker answer is one. A member
 * with its own cred (an embedder's agent, outside any relay) aims `$JS.API.INFO`'s answer at
 * `$KV.cotal_channels_<s>.<channel>` (the broker checks no reply subject; the key is the public
 * channel name): the channel's row, the operator's `deliveryClass: "durable"`, becomes the
 * account info, which names no class, so the channel falls back to the space's default. With a
 * space whose default is `live`, the channel's offline members stop getting durable copies,
 * and the operator's row is gone from the bucket for good (nobody writes it back).
 *
 * The defence holds when a post made after the aimed answer still reaches a durable member, and
 * the daemon has put the operator's row back.
 */
import assert from "node:assert/strict";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { bucketNames, readChannelRegistry, seedChannelRegistry } from "../../lib/wire/mod.ts";
import {
  connectAs,
  dlvCount,
  post,
  startDaemonProcess,
  startDeliverySpace,
} from "../delivery/_helpers.ts";

async function until(cond: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return await cond();
}

Deno.test("redteam20b - an answer aimed at a channel's registry row does not take its durable copies away", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20bchan" });
  // The operator's registry: live by default, `general` durable.
  await seedChannelRegistry({
    servers: s.url,
    creds: await s.mint("provisioner"),
    space: s.space,
    channels: { general: { deliveryClass: "durable" } },
    defaults: { deliveryClass: "live" },
  });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    await post(an, s.space, alice, "general", "before");
    assert.ok(
      await until(async () => await dlvCount(bn, s.space, bob) === 1, 15_000),
      "first copy",
    );

    mn.publish("$JS.API.INFO", new Uint8Array(), {
      reply: `$KV.${bucketNames(s.space).channels}.general`,
    });
    await mn.flush();
    await new Promise((r) => setTimeout(r, 1_000));
    await post(an, s.space, alice, "general", "after");
    const got = await until(async () => await dlvCount(bn, s.space, bob) === 2, 15_000);
    assert.ok(got, "bob's durable copy of the post after the aimed answer never came");
    // The operator's row is back in the bucket, so a restarted daemon reads it too.
    const reg = async () =>
      (await readChannelRegistry({
        servers: s.url,
        creds: await s.mint("observer"),
        space: s.space,
      }))
        .channels.general?.deliveryClass;
    assert.ok(await until(async () => await reg() === "durable", 10_000), "the row is put back");
    await daemon.waitForLine(/channel row "general" was overwritten by no writer; put it back/);
  } finally {
    for (const c of [mn, an, bn]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
