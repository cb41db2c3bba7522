/**
 * Red team 19c, against the delivery daemon (lib/delivery) as a real process on a real broker,
 * the attacker an agent connected straight to the broker with its own creds. Each test asserts
 * the defence HOLDS.
 *
 * The daemon reads `m.headers` (not headersOf) in fanoutOne, the join catch-up, readHistory
 * and the storage warden's read: a header block nats.js cannot decode throws there.
 */
import assert from "node:assert/strict";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { buildMessage, streamNames, subjectForMessage, subjectRoot } from "../../lib/wire/mod.ts";
import { waitFor } from "../_harness/broker.ts";
import {
  connectAs,
  dlvCount,
  post,
  startDaemonProcess,
  startDeliverySpace,
} from "../delivery/_helpers.ts";
import { sendBad } from "./_rt19c.ts";

const ENC = new TextEncoder();

// D1: one undecodable post on a durable channel. fanoutOne throws on `m.headers`; the pull
// loop naks it (1 s) and it is redelivered forever. The next good post must still be copied,
// and the daemon must not log a line per redelivery (at most 5 in 10 s).
Deno.test("redteam19c - one undecodable channel post: the fan-out copies the next post and does not spin on it", async () => {
  await using s = await startDeliverySpace({ prefix: "rt19cfan1" });
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
    const bad = buildMessage({
      space: s.space,
      from: { id: mallory.id, name: mallory.name },
      channel: "general",
      text: "bad",
    });
    await sendBad(mn, subjectForMessage(bad), ENC.encode(JSON.stringify(bad)));
    await post(an, s.space, alice, "general", "after");
    await waitFor(async () => await dlvCount(bn, s.space, bob) === 1, {
      what: "bob's copy of the post after the undecodable one",
      timeoutMs: 15_000,
    });
    const before = daemon.stderr().split("\n").length;
    await new Promise((r) => setTimeout(r, 10_000));
    const lines = daemon.stderr().split("\n").slice(before - 1).filter((l) => l.trim());
    assert.ok(
      lines.length <= 5,
      `${lines.length} daemon lines in 10 s:\n${lines.slice(0, 5).join("\n")}`,
    );
  } finally {
    for (const c of [mn, an, bn]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});

// D2: 1,000 undecodable posts (CHAT keeps 1,000 per subject; the fan-out durable's
// max_ack_pending is 1,000). Each is nak'ed and stays pending forever: the broker would deliver
// the fan-out nothing else, and durable delivery would stop for the whole space.
Deno.test("redteam19c - 1,000 undecodable channel posts do not stall the fan-out for everyone", async () => {
  await using s = await startDeliverySpace({ prefix: "rt19cfan2" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice", { allowSubscribe: ["general", "ops"] });
  const bob = await s.agent("bob", { allowSubscribe: ["general", "ops"] });
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "ops" });
    const bad = buildMessage({
      space: s.space,
      from: { id: mallory.id, name: mallory.name },
      channel: "general",
      text: "bad",
    });
    await sendBad(mn, subjectForMessage(bad), ENC.encode(JSON.stringify(bad)), 1_000);
    await new Promise((r) => setTimeout(r, 3_000));
    // A post on another channel, by another member.
    await post(an, s.space, alice, "ops", "after the flood");
    await waitFor(async () => await dlvCount(bn, s.space, bob) === 1, {
      what: "bob's copy on ops after 1,000 undecodable posts on general",
      timeoutMs: 30_000,
    });
  } catch (e) {
    const look = await connectAs(s.url, s.deliveryCreds);
    const ci = await (await look.jetstreamManager()).consumers.info(
      streamNames(s.space).chat,
      "fanout",
    );
    console.error(
      "fanout: ack_pending",
      ci.num_ack_pending,
      "pending",
      ci.num_pending,
      "redelivered",
      ci.num_redelivered,
    );
    console.error("daemon log lines:", daemon.stderr().split("\n").length);
    await look.close();
    throw e;
  } finally {
    for (const c of [mn, an, bn]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});

// D3: an undecodable post in a channel: the daemon's mediated readHistory must still answer.
Deno.test("redteam19c - an undecodable post: the daemon's readHistory still answers with the good posts", async () => {
  await using s = await startDeliverySpace({ prefix: "rt19chist" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    await post(an, s.space, alice, "general", "old 1");
    const bad = buildMessage({
      space: s.space,
      from: { id: mallory.id, name: mallory.name },
      channel: "general",
      text: "bad",
    });
    await sendBad(mn, subjectForMessage(bad), ENC.encode(JSON.stringify(bad)));
    await post(an, s.space, alice, "general", "old 2");
    const r = await deliveryRequest(an, s.space, alice.principal, "readHistory", {
      channel: "general",
      limit: 10,
    }, { timeoutMs: 10_000 }).catch((e) => ({ thrown: String(e?.message ?? e) }));
    const texts = JSON.stringify(r);
    assert.ok(texts.includes("old 1") && texts.includes("old 2"), texts.slice(0, 400));
  } finally {
    for (const c of [mn, an]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});

// D4: an undecodable DM (Mallory to Alice) before answers aimed at bob->alice (red team 11's
// X): the storage warden's read throws on `m.headers` at the DM, its cursor never passes it,
// and it never deletes the aimed answers behind it. They must be gone within 20 s.
Deno.test("redteam19c - an undecodable DM does not blind the storage warden", async () => {
  await using s = await startDeliverySpace({ prefix: "rt19cward" });
  const daemon = startDaemonProcess(s);
  const P = subjectRoot(s.space);
  const mallory = await s.agent("mallory");
  await s.agent("alice");
  await s.agent("bob");
  const mn = await connectAs(s.url, mallory.creds);
  const look = await connectAs(s.url, s.deliveryCreds);
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    await sendBad(mn, `${P}.inst.local.alice.local.mallory`, ENC.encode("{}"));
    const pair = `${P}.inst.local.alice.local.bob`;
    for (let i = 0; i < 50; i++) mn.publish("$JS.API.INFO", "", { reply: pair });
    await mn.flush();
    const jsm = await look.jetstreamManager();
    const count = async () =>
      (await jsm.streams.info(streamNames(s.space).dm, { subjects_filter: pair })).state
        .subjects?.[pair] ?? 0;
    await waitFor(async () => (await count()) === 0, {
      what: "the aimed answers deleted",
      timeoutMs: 20_000,
    }).catch(() => {});
    const left = await count();
    const warns = daemon.stderr().split("\n").filter((l) => /warden/.test(l)).slice(0, 3);
    assert.equal(left, 0, `${left} aimed answers left on ${pair}; ${warns.join(" | ")}`);
  } finally {
    for (const c of [mn, look]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
