/**
 * Red team 22: a member with its own agent cred (no relay, no guard) fills the coordination
 * buckets that take any key — `cotal_members_<s>` (64 MiB), `cotal_acl_<s>` (64 MiB) and
 * `cotal_channels_<s>` (16 MiB), all discard-new, no TTL — with broker answers aimed at keys
 * nobody uses. Each answer is a tiny `$JS.API.INFO` reply, but the stored message counts its
 * *subject* too, and the reply subject may be ~60 KiB under the broker's 64 KiB control line:
 * about 1,100 publishes fill a 64 MiB bucket in under a second. The row cap (64 KiB payload)
 * does not count the subject. Nothing clears such rows: the members mirror ignores junk, so
 * the ended-lifecycle prune never sees it; nobody purges the ACL or channel bucket.
 *
 * The defence holds when, after the flood, an honest member can still join a durable channel
 * (a members-bucket write), a new agent can still be provisioned (an ACL-bucket write), and the
 * operator can still declare a channel (a channel-registry write).
 *
 * Observed (nats-server 2.15.1, all three fail): ACL bucket 67,108,848 of 67,108,864 bytes
 * (1,140 rows) after 5.5 s, then `s.agent("carol")` refused: "Could not write the ACL row ...
 * (maximum bytes exceeded)" — every later spawn fails. Channel registry 16,777,173 of
 * 16,777,216 (312 rows) after 1.2 s, then the operator's declaration refused the same way.
 * Members bucket 67,108,586 of 67,108,864 (1,124 rows) after 7.5 s; bob's durableJoin got no
 * answer in 30 s because the daemon itself stalled reading the fat rows (warden TIMEOUTs,
 * connection lost, lease "going quiet": redteam22_members_stall_test.ts). No TTL, no purge:
 * the rows stay.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { bucketNames } from "../../lib/wire/resources.ts";
import { seedChannelRegistry } from "../../lib/wire/mod.ts";
import { connectAs, startDaemonProcess, startDeliverySpace } from "../delivery/_helpers.ts";

const LONG = "k".repeat(60_000);

/** Aims `$JS.API.INFO` answers at `n` fat keys of `bucket`. */
async function aimFat(nc: NatsConnection, bucket: string, n: number, tag: string) {
  for (let i = 0; i < n; i++) {
    nc.publish("$JS.API.INFO", new Uint8Array(), { reply: `$KV.${bucket}.${tag}${i}.${LONG}` });
    if (i % 50 === 49) await nc.flush();
  }
  await nc.flush();
}

async function bucketState(nc: NatsConnection, bucket: string) {
  const jsm = await nc.jetstreamManager();
  const i = await jsm.streams.info(`KV_${bucket}`);
  return { bytes: i.state.bytes, msgs: i.state.messages, max: i.config.max_bytes };
}

async function fill(
  mn: NatsConnection,
  reader: NatsConnection,
  bucket: string,
  presence: string,
  mallory: string,
) {
  const t0 = Date.now();
  let st = await bucketState(reader, bucket);
  for (let round = 0; round < 40 && st.bytes < st.max - 200_000; round++) {
    await aimFat(mn, bucket, 100, `r${round}x`);
    await new Promise((r) => setTimeout(r, 100));
    st = await bucketState(reader, bucket);
  }
  // Topped off with short keys, then with publish acks (~50 bytes: mallory's presence write,
  // its ack aimed at the bucket), so what is left is smaller than any real row.
  for (let round = 0; round < 40 && st.bytes < st.max - 600; round++) {
    for (let i = 0; i < 200; i++) {
      mn.publish("$JS.API.INFO", new Uint8Array(), { reply: `$KV.${bucket}.t${round}y${i}` });
    }
    await mn.flush();
    await new Promise((r) => setTimeout(r, 50));
    st = await bucketState(reader, bucket);
  }
  for (let round = 0; round < 10 && st.bytes < st.max - 120; round++) {
    for (let i = 0; i < 20; i++) {
      mn.publish(`$KV.${presence}.${mallory}`, new TextEncoder().encode("{}"), {
        reply: `$KV.${bucket}.a${round}z${i}`,
      });
    }
    await mn.flush();
    await new Promise((r) => setTimeout(r, 50));
    st = await bucketState(reader, bucket);
  }
  console.log(
    `${bucket}: ${st.bytes} of ${st.max} bytes, ${st.msgs} rows, after ${Date.now() - t0} ms`,
  );
  return st;
}

Deno.test({
  name:
    "redteam22 - fat-key aimed answers filling the members bucket do not stop durable joins (skipped: known gap, not fixed; a member's own connection may name any reply subject and the broker's answers, JetStream acks and API replies, are stored by whichever stream captures it: NATS checks no permission on reply subjects, the 64 KiB control line a JWT needs lets each answer's subject be ~60 KiB, and only the sandbox relay refuses such requests)",
  ignore: true,
}, async () => {
  await using s = await startDeliverySpace({ prefix: "rt22memb" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const bob = await s.agent("bob", { allowSubscribe: ["general", "ops"] });
  const mn = await connectAs(s.url, mallory.creds);
  const bn = await connectAs(s.url, bob.creds);
  const reader = await connectAs(s.url, s.deliveryCreds);
  try {
    await daemon.waitForLine(/delivery daemon up/);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    await fill(mn, reader, bucketNames(s.space).members, bucketNames(s.space).presence, mallory.id);
    let err: unknown;
    try {
      await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "ops" }, {
        timeoutMs: 30_000,
      });
    } catch (e) {
      err = e;
    }
    console.log(daemon.stderr().split("\n").slice(-12).join("\n"));
    assert.equal(err, undefined, `bob's durable join was refused after the flood: ${err}`);
  } finally {
    for (const c of [mn, bn, reader]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test({
  name:
    "redteam22 - fat-key aimed answers filling the ACL bucket do not stop provisioning (skipped: known gap, not fixed; a member's own connection may name any reply subject and the broker's answers, JetStream acks and API replies, are stored by whichever stream captures it: NATS checks no permission on reply subjects, the 64 KiB control line a JWT needs lets each answer's subject be ~60 KiB, and only the sandbox relay refuses such requests)",
  ignore: true,
}, async () => {
  await using s = await startDeliverySpace({ prefix: "rt22acl" });
  const mallory = await s.agent("mallory");
  const mn = await connectAs(s.url, mallory.creds);
  const reader = await connectAs(s.url, s.deliveryCreds);
  try {
    await fill(mn, reader, bucketNames(s.space).acl, bucketNames(s.space).presence, mallory.id);
    let err: unknown;
    try {
      await s.agent("carol");
    } catch (e) {
      err = e;
    }
    assert.equal(err, undefined, `a new agent could not be provisioned after the flood: ${err}`);
  } finally {
    for (const c of [mn, reader]) await c.close().catch(() => {});
  }
});

Deno.test({
  name:
    "redteam22 - fat-key aimed answers filling the channel registry do not stop a channel declaration (skipped: known gap, not fixed; a member's own connection may name any reply subject and the broker's answers, JetStream acks and API replies, are stored by whichever stream captures it: NATS checks no permission on reply subjects, the 64 KiB control line a JWT needs lets each answer's subject be ~60 KiB, and only the sandbox relay refuses such requests)",
  ignore: true,
}, async () => {
  await using s = await startDeliverySpace({ prefix: "rt22chan" });
  const mallory = await s.agent("mallory");
  const mn = await connectAs(s.url, mallory.creds);
  const reader = await connectAs(s.url, s.deliveryCreds);
  try {
    await fill(
      mn,
      reader,
      bucketNames(s.space).channels,
      bucketNames(s.space).presence,
      mallory.id,
    );
    let err: unknown;
    try {
      await seedChannelRegistry({
        servers: s.url,
        space: s.space,
        creds: await s.mint("provisioner"),
        channels: { announcements: { deliveryClass: "durable" } },
      });
    } catch (e) {
      err = e;
    }
    assert.equal(err, undefined, `the operator's channel declaration was refused: ${err}`);
  } finally {
    for (const c of [mn, reader]) await c.close().catch(() => {});
  }
});
