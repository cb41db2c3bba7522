/**
 * Colluding agents that message each other and never read can neither fill the space's shared
 * stores nor make an honest member's messages go (red team 7's extrapolation, and red team
 * 10's attack on the first warden, made here): ten agents holding their own agent creds DM an
 * honest offline agent and each other, and hand each other's roles tasks, ~60 KiB each, far
 * more than DM (512 MiB) or TASK (256 MiB) holds. With the real delivery daemon's storage
 * warden, both stay open: the colluders' oldest messages are trimmed, an honest sender's 1 KiB
 * DMs to the same offline recipient all stay, the recipient is told by a gap marker naming
 * who was trimmed, and the operator can list what was trimmed, sender by sender.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import type { TrimRecord } from "../../lib/delivery/setaside.ts";
import { PROTECTED_SENDER_BYTES, WARDEN_ONSET } from "../../lib/delivery/warden.ts";
import {
  dlvDurableName,
  GAP_MARKER_HEADER,
  parseGapMarker,
  STREAM_LIMITS,
  streamNames,
  subjectRoot,
} from "../../lib/wire/mod.ts";
import { MEMBER_BACKLOG_CAP } from "../../lib/wire/streams.ts";
import { waitFor } from "../_harness/broker.ts";
import {
  type Agent,
  connectAs,
  drainDlv,
  post,
  startDaemonProcess,
  startDeliverySpace,
  waitSettled,
} from "./_helpers.ts";
import { burst, envelope } from "./_flood.ts";

const OPERATOR = { owner: "local", actor: "operator" };
const KIB = 1024;

/** Publishes `n` genuine ~60 KiB messages from `from` on `subject`; resolves the refusals. */
function flood(
  nc: NatsConnection,
  space: string,
  from: Agent,
  subject: string,
  n: number,
): Promise<number> {
  return burst(nc, subject, n, () => ({ data: envelope(space, from.id, 60 * KIB) }));
}

Deno.test("delivery - colluders that DM an offline agent and each other and never read cannot fill DM or TASK, nor cut an honest sender's DMs: the warden trims their oldest and tells the recipient", async () => {
  await using s = await startDeliverySpace({ prefix: "warden" });
  const daemon = startDaemonProcess(s);
  const P = subjectRoot(s.space);
  const names = streamNames(s.space);
  const K = 10;
  const colluders: Agent[] = [];
  for (let i = 0; i < K; i++) colluders.push(await s.agent(`c${i}`, { role: `r${i}` }));
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const conns = await Promise.all(colluders.map((c) => connectAs(s.url, c.creds)));
  const bn = await connectAs(s.url, bob.creds);
  const an = await connectAs(s.url, alice.creds);
  const look = await connectAs(s.url, s.deliveryCreds);
  const ctl = await connectAs(s.url, await s.mint("control-caller", { principal: OPERATOR }));
  const dm = (to: Agent, from: Agent) => `${P}.inst.local.${to.name}.local.${from.name}`;
  const task = (role: string, from: Agent) => `${P}.svc.${role}.local.${from.name}`;
  try {
    await daemon.waitForLine(/delivery daemon up/);
    const jsm = await look.jetstreamManager();
    // The honest messages come first, so they are the oldest the colluders' floods pile on:
    // bob's 100 short DMs to alice, who is offline (red team 10's victim), a few to a colluder.
    const bjs = bn.jetstream();
    const msg = (bytes: number) => envelope(s.space, bob.id, bytes);
    for (let i = 0; i < 100; i++) await bjs.publish(dm(alice, bob), msg(KIB));
    for (let i = 0; i < 3; i++) await bjs.publish(dm(colluders[0], bob), msg(60 * KIB));
    for (let i = 0; i < 2; i++) await bjs.publish(task("r0", bob), msg(60 * KIB));

    // Every colluder fills its pair to alice, DMs every other colluder, and hands every other's
    // role tasks (TASK: five roles).
    const pairs = STREAM_LIMITS.dm.maxMsgsPerSubject;
    const each = 48;
    assert.ok(
      K * (pairs + (K - 1) * each) * 60 * KIB > 0.75 * STREAM_LIMITS.dm.maxBytes,
      "DM would be three quarters full",
    );
    assert.ok(5 * 4 * pairs * 60 * KIB > STREAM_LIMITS.task.maxBytes, "TASK would fill");
    await Promise.all(colluders.map(async (from, i) => {
      await flood(conns[i], s.space, from, dm(alice, from), pairs);
      for (const [j, to] of colluders.entries()) {
        if (j === i) continue;
        await flood(conns[i], s.space, from, dm(to, from), each);
        if (i < 5 && j < 5) await flood(conns[i], s.space, from, task(`r${j}`, from), pairs);
      }
    }));

    // The warden brings both streams back under its onset by itself.
    const bytes = async (st: string) => (await jsm.streams.info(st)).state.bytes;
    await waitFor(async () =>
      (await bytes(names.dm)) < WARDEN_ONSET * STREAM_LIMITS.dm.maxBytes &&
      (await bytes(names.task)) < WARDEN_ONSET * STREAM_LIMITS.task.maxBytes, {
      timeoutMs: 60_000,
      what: "DM and TASK under half full",
    });
    const counts = async (st: string, filter: string) =>
      (await jsm.streams.info(st, { subjects_filter: filter })).state.subjects ?? {};
    const dmCounts = await counts(names.dm, `${P}.inst.>`);
    const taskCounts = await counts(names.task, `${P}.svc.>`);
    // Honest: all of bob's DMs to the offline alice, his few to a colluder, his tasks.
    assert.equal(dmCounts[dm(alice, bob)], 100);
    assert.equal(dmCounts[dm(colluders[0], bob)], 3);
    assert.equal(taskCounts[task("r0", bob)], 2);
    // Each colluder keeps at least its protected bytes (the trim is a level, not a wipe), and
    // the colluders together lost some: they paid for the room, not the honest. (Which of them
    // lost depends on who held the most at each trim: a flood scheduled late can stay under.)
    let keptAll = 0;
    for (const c of colluders) {
      const kept = Object.entries(dmCounts).filter(([k]) => k.endsWith(`.local.${c.name}`))
        .reduce((a, [, n]) => a + n, 0);
      keptAll += kept;
      assert.ok(
        kept * 60 * KIB >= PROTECTED_SENDER_BYTES - 60 * KIB,
        `${c.name} keeps ${kept}`,
      );
    }
    assert.ok(keptAll < K * (pairs + (K - 1) * each), `the colluders kept all ${keptAll}`);
    // DM and TASK take new messages.
    await bjs.publish(dm(alice, bob), msg(60 * KIB));
    await bjs.publish(task("r1", bob), msg(60 * KIB));

    // The operator can see what was trimmed, sender by sender; nothing of bob's.
    let records: TrimRecord[] = [];
    await waitFor(async () => {
      records = (await deliveryRequest(ctl, s.space, OPERATOR, "setAside", {}, {
        service: "delivery-admin",
      }) as { trimmed: TrimRecord[] }).trimmed;
      return records.some((t) => t.recipient === "local.alice" && /^local\.c\d$/.test(t.sender)) &&
        records.some((t) => /^r\d$/.test(t.recipient));
    }, { timeoutMs: 15_000, what: "trim records of DMs to alice and of a role" });
    assert.equal(records.some((t) => t.sender === "local.bob"), false);
    assert.ok(records.every((t) => t.purged > 0 && t.bytes > 0));
    await daemon.waitForLine(
      /storage warden: DM_\S+ was \d+% full; trimmed the oldest \d+ unread DM messages/,
      15_000,
    );

    // Alice, when she reads, is told whose DMs were trimmed: a gap marker in her DLV.
    const dlv = await an.jetstream().consumers.get(
      names.dlv,
      dlvDurableName(alice.principal, alice.uid),
    );
    const from = new Set<string>();
    await waitFor(async () => {
      const batch = await dlv.fetch({ max_messages: 50, expires: 1000 });
      for await (const m of batch) {
        if (m.headers?.get(GAP_MARKER_HEADER) === "1") {
          const g = parseGapMarker(m.data);
          if (g?.from) from.add(g.from);
        }
        m.ack();
      }
      return from.size > 0;
    }, { timeoutMs: 15_000, what: "alice's gap marker naming a trimmed sender" });
    assert.ok([...from].every((f) => /^local\.c\d$/.test(f)), [...from].join(", "));
  } finally {
    for (const nc of [...conns, bn, an, look, ctl]) await nc.close();
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("delivery - members that never read cannot fill DLV: past half full the largest backlogs get gap markers, a reader's copies still come", async () => {
  await using s = await startDeliverySpace({ prefix: "wardendlv" });
  const daemon = startDaemonProcess(s);
  const names = streamNames(s.space);
  const HOARDERS = 24;
  const poster = await s.agent("poster", { allowSubscribe: ["flood", "ops"] });
  const reader = await s.agent("reader", { allowSubscribe: ["ops"] });
  const hoarders: Agent[] = [];
  for (let i = 0; i < HOARDERS; i++) {
    hoarders.push(await s.agent(`h${i}`, { allowSubscribe: ["flood"] }));
  }
  const pn = await connectAs(s.url, poster.creds);
  const rn = await connectAs(s.url, reader.creds);
  const look = await connectAs(s.url, s.deliveryCreds);
  const ctl = await connectAs(s.url, await s.mint("control-caller", { principal: OPERATOR }));
  try {
    await daemon.waitForLine(/delivery daemon up/);
    for (const h of hoarders) {
      const hn = await connectAs(s.url, h.creds);
      await deliveryRequest(hn, s.space, h.principal, "durableJoin", { channel: "flood" });
      await hn.close();
    }
    await deliveryRequest(rn, s.space, reader.principal, "durableJoin", { channel: "ops" });
    // Each hoarder's whole backlog, 24 of them: 70 % of DLV if nothing stopped it.
    const text = "x".repeat(60 * 1024);
    const attempted = HOARDERS * MEMBER_BACKLOG_CAP * text.length;
    assert.ok(attempted > 0.65 * STREAM_LIMITS.dlv.maxBytes);
    for (let i = 0; i < MEMBER_BACKLOG_CAP; i++) await post(pn, s.space, poster, "flood", text);
    await waitSettled(s, 120_000);
    // The reader's channel, with DLV under pressure: every copy reaches it, no gap.
    for (let i = 0; i < 10; i++) await post(pn, s.space, poster, "ops", `ops ${i}`);
    await waitSettled(s, 30_000);
    const got = await drainDlv(rn, s.space, reader, { until: 10, timeoutMs: 20_000 });
    assert.deepEqual(got.messages.map((m) => m.parts[0]).map((p) => (p as { text: string }).text), [
      ...Array.from({ length: 10 }, (_, i) => `ops ${i}`),
    ]);
    const jsm = await look.jetstreamManager();
    const dlv = await jsm.streams.info(names.dlv);
    assert.ok(
      dlv.state.bytes < 0.6 * STREAM_LIMITS.dlv.maxBytes,
      `DLV holds ${Math.round(dlv.state.bytes / 2 ** 20)} MiB`,
    );
    // What the hoarders did not get is counted for their gap markers, not lost in silence.
    const listed = await deliveryRequest(ctl, s.space, OPERATOR, "setAside", {}, {
      service: "delivery-admin",
    }) as { gaps: { member: string; count: number }[] };
    assert.ok(listed.gaps.length > 0 && listed.gaps.every((g) => /^local\.h\d+$/.test(g.member)));
    assert.match(daemon.stderr(), /storage warden: DLV is \d+% full; \d+ members/);
  } finally {
    for (const nc of [pn, rn, look, ctl]) await nc.close();
    daemon.kill();
    await daemon.exited;
  }
});
