/**
 * Red team 22: a member with its own agent cred (no relay, no guard) aims `$JS.API.INFO`
 * answers at made-up keys of the members bucket (`cotal_members_<s>`), each under a ~60 KiB
 * reply subject (the broker's control line is 64 KiB; the row cap counts payload, not subject).
 * ~1,100 of them fill the bucket's 64 MiB; re-aiming at the *same* keys is then still accepted
 * (a key at its per-subject limit is replaced even under discard-new), so the member can keep
 * writing ~64 MiB of new rows per round for as long as it likes. The delivery daemon follows
 * that bucket on its one connection, and every fan-out and reader decision first waits for the
 * members mirror to catch up (`ctx.members.sync()`).
 *
 * Observed (nats-server 2.15.1): a one-off fill alone delayed the next durable copies by up to
 * 44 s, cut the daemon's broker connection 4 times and made it lose and re-take its lease.
 * Re-aimed for 40 s: members bucket, 0 of 9 posts reached bob's DLV, connection lost 3x, lease
 * lost ("going quiet", "the lease row vanished ... re-acquired"), fan-out "mirror ... did not
 * catch up"; channel registry (275 fat keys, 16 MiB), 1 of 9 arrived, connection lost 2x.
 * The defence holds when, during the flood, posts to a durable channel still reach an offline
 * member's DLV within 10 s each.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { bucketNames } from "../../lib/wire/resources.ts";
import {
  connectAs,
  dlvCount,
  post,
  startDaemonProcess,
  startDeliverySpace,
} from "../delivery/_helpers.ts";

const LONG = "k".repeat(60_000);

async function aimFat(nc: NatsConnection, bucket: string, n: number) {
  for (let i = 0; i < n; i++) {
    nc.publish("$JS.API.INFO", new Uint8Array(), { reply: `$KV.${bucket}.f${i}.${LONG}` });
    if (i % 50 === 49) await nc.flush();
  }
  await nc.flush();
}

async function stallCase(which: "members" | "channels", keys: number) {
  await using s = await startDeliverySpace({ prefix: `rt22stall${which}` });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  let flooding = true;
  let rounds = 0;
  let flood: Promise<void> = Promise.resolve();
  try {
    await daemon.waitForLine(/delivery daemon up/);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    await post(an, s.space, alice, "general", "before");
    const d0 = Date.now() + 20_000;
    while (await dlvCount(bn, s.space, bob) < 1) {
      assert.ok(Date.now() < d0, "the first copy never arrived");
      await new Promise((r) => setTimeout(r, 100));
    }
    flood = (async () => {
      while (flooding) {
        await aimFat(mn, bucketNames(s.space)[which], keys).catch(() => {});
        rounds++;
      }
    })();
    // Posts every 4 s for 36 s; each copy's arrival is recorded.
    const sent: number[] = [];
    const arrived: number[] = [];
    const until = Date.now() + 40_000;
    let n = 1;
    while (Date.now() < until) {
      if (sent.length < 9) {
        await post(an, s.space, alice, "general", `during ${sent.length}`).catch(() => {});
        sent.push(Date.now());
      }
      const c = await dlvCount(bn, s.space, bob).catch(() => n);
      while (n < c) {
        arrived.push(Date.now());
        n++;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
    flooding = false;
    const lost = (daemon.stderr().match(/connection lost/g) ?? []).length;
    const quiet = (daemon.stderr().match(/going quiet/g) ?? []).length;
    const lat = arrived.map((a, i) => a - sent[i]);
    console.log(
      `flood rounds ${rounds}; posts ${sent.length}, copies arrived ${arrived.length}; ` +
        `latencies ms ${lat.join(", ")}; connection lost ${lost}x, went quiet ${quiet}x`,
    );
    console.log(daemon.stderr().split("\n").slice(-12).join("\n"));
    assert.equal(arrived.length, sent.length, "copies posted during the flood never arrived");
    assert.ok(lat.every((l) => l < 10_000), `copies were delayed: ${lat.join(", ")} ms`);
  } finally {
    flooding = false;
    await flood;
    for (const c of [mn, an, bn]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
}

Deno.test({
  name:
    "redteam22 - fat-key aimed answers re-aimed at the members bucket do not stall durable delivery (skipped: known gap, not fixed; a member's own connection may name any reply subject and the broker's answers, JetStream acks and API replies, are stored by whichever stream captures it: NATS checks no permission on reply subjects, the 64 KiB control line a JWT needs lets each answer's subject be ~60 KiB, and only the sandbox relay refuses such requests)",
  ignore: true,
}, async () => {
  await stallCase("members", 1100);
});

Deno.test({
  name:
    "redteam22 - fat-key aimed answers re-aimed at the channel registry do not stall durable delivery (skipped: known gap, not fixed; a member's own connection may name any reply subject and the broker's answers, JetStream acks and API replies, are stored by whichever stream captures it: NATS checks no permission on reply subjects, the 64 KiB control line a JWT needs lets each answer's subject be ~60 KiB, and only the sandbox relay refuses such requests)",
  ignore: true,
}, async () => {
  await stallCase("channels", 275);
});
