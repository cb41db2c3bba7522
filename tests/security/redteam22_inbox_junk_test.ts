/**
 * Red team 22: a member with its own agent cred (no relay, no guard) aims `$JS.API.INFO`
 * answers at made-up subjects under INBOX (`cotal.<s>.dinbox.x.y.<~60 KiB token>`). INBOX is a
 * limits stream over `cotal.<s>.dinbox.>` (1 GiB, discard old), so every answer is stored; the
 * daemon's one `reader` durable filters the whole of it, reads each fat message in order behind
 * the honest entries the fan-out writes, and terminates it. Nothing deletes the junk sooner, and
 * at 1 GiB INBOX drops its oldest entries, honest ones included, whether the reader moved them
 * or not.
 *
 * The defence holds when, with the member flooding, posts to a durable channel still reach an
 * offline member's DLV within 10 s each.
 *
 * Observed (nats-server 2.15.1): 11,200 answers aimed in 40 s; INBOX 11,284 messages,
 * 651 MiB; the reader 10,343 behind; 1 of 9 posts made during the flood reached bob's DLV
 * (6.7 s), the other 8 not within the test. At that rate INBOX reaches its 1 GiB cap in about
 * a minute, after which discard-old drops honest entries not yet moved (not measured here).
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { streamNames } from "../../lib/wire/mod.ts";
import {
  connectAs,
  dlvCount,
  post,
  startDaemonProcess,
  startDeliverySpace,
} from "../delivery/_helpers.ts";

const LONG = "i".repeat(60_000);

async function aim(nc: NatsConnection, prefix: string, from: number, n: number) {
  for (let i = from; i < from + n; i++) {
    nc.publish("$JS.API.INFO", new Uint8Array(), { reply: `${prefix}.${i}.${LONG}` });
    if (i % 50 === 49) await nc.flush();
  }
  await nc.flush();
}

Deno.test({
  name:
    "redteam22 - fat-subject aimed answers in INBOX do not stall durable channel delivery (skipped: known gap, not fixed; a member's own connection may name any reply subject and the broker's answers, JetStream acks and API replies, are stored by whichever stream captures it: NATS checks no permission on reply subjects, the 64 KiB control line a JWT needs lets each answer's subject be ~60 KiB, and only the sandbox relay refuses such requests)",
  ignore: true,
}, async () => {
  await using s = await startDeliverySpace({ prefix: "rt22inbox" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  const reader = await connectAs(s.url, s.deliveryCreds);
  const jsm = await reader.jetstreamManager();
  let flooding = true;
  let sentN = 0;
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
        await aim(mn, `cotal.${s.space}.dinbox.x.y`, sentN, 100).catch(() => {});
        sentN += 100;
      }
    })();
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
    const si = await jsm.streams.info(streamNames(s.space).inbox);
    const ri = await jsm.consumers.info(streamNames(s.space).inbox, "reader");
    const lat = arrived.map((a, i) => a - sent[i]);
    console.log(
      `aimed ${sentN}; INBOX ${si.state.messages} msgs ${
        (si.state.bytes / 2 ** 20).toFixed(0)
      } MiB, reader pending ${ri.num_pending}; posts ${sent.length}, copies ${arrived.length}; ` +
        `latencies ms ${lat.join(", ")}`,
    );
    console.log(daemon.stderr().split("\n").slice(-6).join("\n"));
    assert.equal(arrived.length, sent.length, "copies posted during the flood never arrived");
    assert.ok(lat.every((l) => l < 10_000), `copies were delayed: ${lat.join(", ")} ms`);
  } finally {
    flooding = false;
    await flood;
    for (const c of [mn, an, bn, reader]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
