/**
 * Red team 20b: a member with its own cred (an embedder's agent: no relay, no guard) fills the
 * delivery lease bucket (`cotal_delivery_<s>`: 1 MiB, discard new, 30 s TTL) with broker answers
 * aimed at keys nobody uses (`$JS.API.INFO` with reply `$KV.cotal_delivery_<s>.j.<n>`; the
 * broker checks no reply subject). Every row is small, but 1 MiB is a few thousand of them, and
 * the member re-aims as fast as they age out. The holder's renew is then refused ("maximum
 * bytes exceeded"), its row ages out after 30 s, its re-acquire is refused too, and it leaves
 * ("another daemon serves the space"); no successor can take a lease it cannot write.
 *
 * The defence holds when the daemon keeps serving: after the flood has run past the lease's
 * TTL, a post to a durable channel still reaches an offline member's DLV durable.
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

/** Aims `$JS.API.INFO` answers at `n` keys of `bucket` under `prefix`. */
async function aimMany(nc: NatsConnection, bucket: string, prefix: string, n: number) {
  for (let i = 0; i < n; i++) {
    nc.publish("$JS.API.INFO", new Uint8Array(), { reply: `$KV.${bucket}.${prefix}.${i}` });
    if (i % 500 === 499) await nc.flush();
  }
  await nc.flush();
}

async function bucketBytes(nc: NatsConnection, bucket: string): Promise<number> {
  const jsm = await nc.jetstreamManager();
  return (await jsm.streams.info(`KV_${bucket}`)).state.bytes;
}

Deno.test("redteam20b - aimed answers filling the delivery lease bucket do not stop durable delivery", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20blease" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  const bucket = bucketNames(s.space).delivery;
  let flooding = true;
  let flood: Promise<void> = Promise.resolve();
  try {
    await daemon.waitForLine(/delivery daemon up/);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    await post(an, s.space, alice, "general", "before");
    const deadline1 = Date.now() + 20_000;
    while (await dlvCount(bn, s.space, bob) < 1) {
      assert.ok(Date.now() < deadline1, "the first copy never arrived");
      await new Promise((r) => setTimeout(r, 100));
    }

    // The flood: 4,000 distinct keys, re-aimed every 500 ms (rows age out after 30 s).
    flood = (async () => {
      while (flooding) {
        await aimMany(mn, bucket, "j", 4000).catch(() => {});
        await new Promise((r) => setTimeout(r, 500));
      }
    })();
    await new Promise((r) => setTimeout(r, 3_000));
    const reader = await connectAs(s.url, s.deliveryCreds);
    const full = await bucketBytes(reader, bucket);
    console.log(`lease bucket holds ${full} bytes`);
    await reader.close();

    // Past the lease's TTL (30 s) and a renew or two.
    const stopAt = Date.now() + 45_000;
    while (Date.now() < stopAt) {
      await new Promise((r) => setTimeout(r, 1000));
      if (/lost the delivery lease|going quiet|exit/i.test(daemon.stderr())) break;
    }
    await post(an, s.space, alice, "general", "during the flood");
    const deadline2 = Date.now() + 20_000;
    let got = 0;
    while (Date.now() < deadline2) {
      got = await dlvCount(bn, s.space, bob);
      if (got >= 2) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    console.log(daemon.stderr().split("\n").slice(-15).join("\n"));
    assert.equal(
      got,
      2,
      `bob's copy of the post made during the flood never arrived:\n${daemon.stderr()}`,
    );
  } finally {
    flooding = false;
    await flood;
    for (const c of [mn, an, bn]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("redteam20b - with the delivery lease bucket filled by aimed answers, a daemon started after the old row aged out still takes the lease", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20bleasesucc" });
  let daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  const bucket = bucketNames(s.space).delivery;
  let flooding = true;
  let flood: Promise<void> = Promise.resolve();
  try {
    await daemon.waitForLine(/delivery daemon up/);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    flood = (async () => {
      while (flooding) {
        await aimMany(mn, bucket, "j", 4000).catch(() => {});
        await new Promise((r) => setTimeout(r, 500));
      }
    })();
    await new Promise((r) => setTimeout(r, 3_000));
    // The daemon is down longer than the lease's TTL (a host reboot, a stopped unit) while the
    // bucket is full: its row ages out, and the next start must create it again.
    daemon.kill("SIGKILL");
    await daemon.exited;
    await new Promise((r) => setTimeout(r, 35_000));
    daemon = startDaemonProcess(s, ["--lease-wait", "60"]);
    let up = true;
    try {
      await daemon.waitForLine(/delivery daemon up/, 75_000);
    } catch {
      up = false;
    }
    assert.ok(up, `no successor took the lease while the bucket was full:\n${daemon.stderr()}`);
    await post(an, s.space, alice, "general", "after the restart");
    const deadline = Date.now() + 20_000;
    while (await dlvCount(bn, s.space, bob) < 1) {
      assert.ok(Date.now() < deadline, "bob's copy never arrived");
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    flooding = false;
    await flood;
    for (const c of [mn, an, bn]) await c.close().catch(() => {});
    daemon.kill("SIGKILL");
    await daemon.exited;
  }
});
