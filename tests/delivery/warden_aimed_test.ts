/**
 * Red team 11's attacks on the storage warden, kept as tests. The broker checks no reply
 * subject, so a member holding only its own agent creds (connected straight to the broker, not
 * through a sandbox's relay) can aim JetStream API answers at another pair's DM or task subject,
 * and the broker stores them there under the names of that pair. Neither the pair's cap nor the
 * warden's by-sender count may then trust those names: each test asserts the promise the attack
 * broke — an honest sender keeps what it sent, and can send more.
 */
import assert from "node:assert/strict";
import { headers, type NatsConnection } from "nats";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import type { TrimRecord } from "../../lib/delivery/setaside.ts";
import {
  decodeMessage,
  dmDurableName,
  STREAM_LIMITS,
  streamNames,
  subjectRoot,
} from "../../lib/wire/mod.ts";
import { waitFor } from "../_harness/broker.ts";
import { type Agent, connectAs, startDaemonProcess, startDeliverySpace } from "./_helpers.ts";
import { burst, envelope } from "./_flood.ts";

const OPERATOR = { owner: "local", actor: "operator" };
const ENC = new TextEncoder();
const KIB = 1024;

Deno.test("delivery - aimed broker answers cannot block an honest pair: the warden deletes what no member wrote, and bob's next DM and task are stored", async () => {
  await using s = await startDeliverySpace({ prefix: "aimblock" });
  const daemon = startDaemonProcess(s);
  const P = subjectRoot(s.space);
  const names = streamNames(s.space);
  const c0 = await s.agent("c0");
  await s.agent("alice");
  await s.agent("w", { role: "worker" });
  const bob = await s.agent("bob");
  const cn = await connectAs(s.url, c0.creds);
  const bn = await connectAs(s.url, bob.creds);
  const look = await connectAs(s.url, s.deliveryCreds);
  try {
    await daemon.waitForLine(/delivery daemon up/);
    const dm = `${P}.inst.local.alice.local.bob`;
    const task = `${P}.svc.worker.local.bob`;
    const bjs = bn.jetstream();
    for (let i = 0; i < 10; i++) await bjs.publish(dm, envelope(s.space, bob.id));
    for (let i = 0; i < 5; i++) await bjs.publish(task, envelope(s.space, bob.id));
    // 300 answers aimed at each of bob's subjects: more than the pair's cap of 256.
    for (let i = 0; i < 300; i++) {
      cn.publish("$JS.API.INFO", "", { reply: dm });
      cn.publish("$JS.API.INFO", "", { reply: task });
    }
    await cn.flush();
    const jsm = await look.jetstreamManager();
    const count = async (st: string, subject: string) =>
      (await jsm.streams.info(st, { subjects_filter: subject })).state.subjects?.[subject] ?? 0;
    // The warden deletes them within its sweeps; bob's own stay.
    await waitFor(
      async () => (await count(names.dm, dm)) === 10 && (await count(names.task, task)) === 5,
      {
        timeoutMs: 20_000,
        what: "the aimed answers deleted, bob's messages kept",
      },
    );
    await bjs.publish(dm, envelope(s.space, bob.id));
    await bjs.publish(task, envelope(s.space, bob.id));
    assert.equal(await count(names.dm, dm), 11);
    await daemon.waitForLine(/aimed answers deleted: \d+ messages of DM_\S+ no member wrote/);
  } finally {
    for (const nc of [cn, bn, look]) await nc.close();
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("delivery - aimed broker answers cannot make the warden trim an honest sender: 29 colluders stuff ~60 KiB answers under bob's name past half of DM, bob's 100 DMs to alice all stay", async () => {
  await using s = await startDeliverySpace({ prefix: "aimtrim" });
  const daemon = startDaemonProcess(s);
  const P = subjectRoot(s.space);
  const names = streamNames(s.space);
  const K = 29;
  const colluders: Agent[] = [];
  for (let i = 0; i < K; i++) colluders.push(await s.agent(`c${i}`));
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const cn = await connectAs(s.url, colluders[0].creds);
  const c1n = await connectAs(s.url, colluders[1].creds);
  const bn = await connectAs(s.url, bob.creds);
  const look = await connectAs(s.url, s.deliveryCreds);
  const ctl = await connectAs(s.url, await s.mint("control-caller", { principal: OPERATOR }));
  try {
    await daemon.waitForLine(/delivery daemon up/);
    const jsm = await look.jetstreamManager();
    const aliceBob = `${P}.inst.local.alice.local.bob`;
    const bjs = bn.jetstream();
    for (let i = 0; i < 100; i++) {
      await bjs.publish(aliceBob, envelope(s.space, bob.id, 0, `honest-${i}`));
    }
    // A CHAT stream info with deleted_details grows with CHAT's interior deletes: c0 pins the
    // head, c1 overflows its per-subject cap until the answer is ~62 KB (under DM's 64 KiB).
    const tiny = async (nc: NatsConnection, subject: string, n: number) =>
      await burst(nc, subject, n, () => ({ data: ENC.encode("{}") }));
    const infoReq = ENC.encode(JSON.stringify({ deleted_details: true }));
    const answerSize = async () =>
      (await cn.request(`$JS.API.STREAM.INFO.${names.chat}`, infoReq, { timeout: 5000 })).data
        .length;
    await tiny(cn, `${P}.chat.local.c0.general`, 1);
    await tiny(c1n, `${P}.chat.local.c1.general`, 4000);
    const s0 = await answerSize();
    await tiny(c1n, `${P}.chat.local.c1.general`, 1000);
    const s1 = await answerSize();
    await tiny(c1n, `${P}.chat.local.c1.general`, Math.floor((62_000 - s1) / ((s1 - s0) / 1000)));
    const size = await answerSize();
    assert.ok(size > 50_000 && size < 64 * KIB, `answer of ${size} bytes`);

    // Aim answers at alice<-bob, then at c<i><-bob, 256 each, until DM is past 60 %.
    for (let i = 0; i < K; i++) {
      const subject = i === 0 ? aliceBob : `${P}.inst.local.c${i}.local.bob`;
      for (let j = 0; j < 270; j++) {
        cn.publish(`$JS.API.STREAM.INFO.${names.chat}`, infoReq, { reply: subject });
        if (j % 32 === 31) await cn.flush();
      }
      await cn.flush();
      if ((await jsm.streams.info(names.dm)).state.bytes > 0.6 * STREAM_LIMITS.dm.maxBytes) break;
    }
    await waitFor(
      async () => (await jsm.streams.info(names.dm)).state.bytes < 0.5 * STREAM_LIMITS.dm.maxBytes,
      { timeoutMs: 40_000, what: "DM under half full" },
    );
    // The answers aimed at alice<-bob go one by one (bob's DMs share the subject): the pair
    // comes back to bob's 100.
    await waitFor(async () => {
      const c = (await jsm.streams.info(names.dm, { subjects_filter: aliceBob })).state.subjects;
      return c?.[aliceBob] === 100;
    }, { timeoutMs: 30_000, what: "alice<-bob back to bob's 100 DMs" });
    // Bob's DMs to alice, read now only to count them: all 100, nothing else.
    const an = await connectAs(s.url, alice.creds);
    const cons = await an.jetstream().consumers.get(
      names.dm,
      dmDurableName(alice.principal, alice.uid),
    );
    let honest = 0;
    let other = 0;
    for (;;) {
      let got = 0;
      for await (const m of await cons.fetch({ max_messages: 300, expires: 1500 })) {
        got++;
        const d = decodeMessage(m.subject, m.data, { space: s.space, headers: m.headers });
        if (d.ok && d.message.id.startsWith("honest-")) honest++;
        else other++;
      }
      if (got === 0) break;
    }
    await an.close();
    assert.equal(honest, 100, `bob's DMs to alice: ${honest} of 100 kept`);
    assert.equal(other, 0, `${other} aimed answers left for alice`);
    const records = (await deliveryRequest(ctl, s.space, OPERATOR, "setAside", {}, {
      service: "delivery-admin",
    }) as { trimmed: TrimRecord[] }).trimmed;
    assert.equal(records.some((t) => t.sender === "local.bob"), false, "no trim blames bob");
  } finally {
    for (const nc of [cn, c1n, bn, look, ctl]) await nc.close();
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("delivery - a spoofed Nats-Msg-Size header on genuine floods neither blinds the warden nor makes it over-cut", async () => {
  await using s = await startDeliverySpace({ prefix: "aimsize" });
  const daemon = startDaemonProcess(s);
  const P = subjectRoot(s.space);
  const names = streamNames(s.space);
  const K = 10;
  const colluders: Agent[] = [];
  for (let i = 0; i < K; i++) colluders.push(await s.agent(`c${i}`));
  await s.agent("alice");
  const bob = await s.agent("bob");
  const conns = await Promise.all(colluders.map((c) => connectAs(s.url, c.creds)));
  const bn = await connectAs(s.url, bob.creds);
  const look = await connectAs(s.url, s.deliveryCreds);
  try {
    await daemon.waitForLine(/delivery daemon up/);
    const jsm = await look.jetstreamManager();
    const dm = (to: string, from: string) => `${P}.inst.local.${to}.local.${from}`;
    // Bob's 100 short DMs to alice carry a huge claimed size (an over-cut would take them).
    for (let i = 0; i < 100; i++) {
      const h = headers();
      h.set("Nats-Msg-Size", "1000000000");
      await bn.jetstream().publish(dm("alice", "bob"), envelope(s.space, bob.id, KIB), {
        headers: h,
      });
    }
    // Colluders claim a hugely negative size on every genuine 60 KiB DM.
    await Promise.all(colluders.map(async (from, i) => {
      const make = () => {
        const h = headers();
        h.set("Nats-Msg-Size", "-1000000000000000");
        return { data: envelope(s.space, from.id, 60 * KIB), headers: h };
      };
      await burst(conns[i], dm("alice", from.name), 256, make);
      for (const [j, to] of colluders.entries()) {
        if (j !== i) await burst(conns[i], dm(to.name, from.name), 64, make);
      }
    }));
    await waitFor(
      async () => (await jsm.streams.info(names.dm)).state.bytes < 0.5 * STREAM_LIMITS.dm.maxBytes,
      { timeoutMs: 40_000, what: "DM under half full" },
    );
    const counts = (await jsm.streams.info(names.dm, { subjects_filter: `${P}.inst.>` })).state
      .subjects ?? {};
    assert.equal(counts[dm("alice", "bob")], 100);
    // The trim's log line follows its records; it is the proof the warden trimmed, not blind.
    await daemon.waitForLine(/trimmed the oldest \d+ unread DM messages/, 15_000);
    await bn.jetstream().publish(dm("alice", "bob"), envelope(s.space, bob.id, 32 * KIB));
  } finally {
    for (const nc of [...conns, bn, look]) await nc.close();
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("delivery - a replay of a genuine DM (a redelivery aimed back into DM) is deleted, not counted again against its sender", async () => {
  await using s = await startDeliverySpace({ prefix: "aimreplay" });
  const daemon = startDaemonProcess(s);
  const P = subjectRoot(s.space);
  const names = streamNames(s.space);
  const c0 = await s.agent("c0");
  const bob = await s.agent("bob");
  const cn = await connectAs(s.url, c0.creds);
  const bn = await connectAs(s.url, bob.creds);
  const look = await connectAs(s.url, s.deliveryCreds);
  try {
    await daemon.waitForLine(/delivery daemon up/);
    const pair = `${P}.inst.local.c0.local.bob`;
    for (let i = 0; i < 3; i++) await bn.jetstream().publish(pair, envelope(s.space, bob.id));
    const jsm = await look.jetstreamManager();
    const count = async () =>
      (await jsm.streams.info(names.dm, { subjects_filter: pair })).state.subjects?.[pair] ?? 0;
    // c0 reads bob's DMs through its own durable, leaves them unacked (nak), then asks its
    // durable for them again with the answer aimed into DM: the broker stores the redelivered
    // copies under their own subject, bob's pair, again.
    const durable = dmDurableName(c0.principal, c0.uid);
    const mine = await cn.jetstream().consumers.get(names.dm, durable);
    for await (const m of await mine.fetch({ max_messages: 3, expires: 2000 })) m.nak();
    cn.publish(`$JS.API.CONSUMER.MSG.NEXT.${names.dm}.${durable}`, JSON.stringify({ batch: 3 }), {
      reply: pair,
    });
    await cn.flush();
    // The copies were stored (they took sequences after bob's three); the warden leaves the
    // pair with bob's three.
    await waitFor(async () => (await jsm.streams.info(names.dm)).state.last_seq > 3, {
      timeoutMs: 10_000,
      what: "the redelivered copies stored in DM",
    });
    await waitFor(async () => (await count()) === 3, {
      timeoutMs: 15_000,
      what: "bob's pair back to his three DMs",
    });
  } finally {
    for (const nc of [cn, bn, look]) await nc.close();
    daemon.kill();
    await daemon.exited;
  }
});
