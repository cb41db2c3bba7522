/**
 * Colluding agents that message each other and never read cannot fill the space's shared
 * stores (red team 7's extrapolation, made here): seven agents holding their own agent creds
 * DM each other and hand each other's roles tasks, 256 of ~60 KiB per pair, far more than DM
 * (512 MiB) or TASK (256 MiB) holds. With the real delivery daemon's storage warden, both stay
 * open: the largest backlogs are trimmed, an honest recipient's and an honest sender's messages
 * are untouched, new DMs and tasks are stored, and the operator can list what was trimmed.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import type { TrimRecord } from "../../lib/delivery/setaside.ts";
import { PROTECTED_BACKLOG, WARDEN_ONSET } from "../../lib/delivery/warden.ts";
import { STREAM_LIMITS, streamNames, subjectRoot } from "../../lib/wire/mod.ts";
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

const OPERATOR = { owner: "local", actor: "operator" };
const BODY = new Uint8Array(60 * 1024);

/** Publishes `n` bodies on `subject`, 64 in flight; returns how many the broker refused. */
async function flood(nc: NatsConnection, subject: string, n: number): Promise<number> {
  const js = nc.jetstream();
  let refused = 0;
  let inFlight: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    inFlight.push(js.publish(subject, BODY).catch(() => refused++));
    if (inFlight.length >= 64) {
      await Promise.all(inFlight);
      inFlight = [];
    }
  }
  await Promise.all(inFlight);
  return refused;
}

Deno.test("delivery - colluders that DM each other and never read cannot fill DM or TASK: the storage warden trims the largest backlogs and honest ones stay", async () => {
  await using s = await startDeliverySpace({ prefix: "warden" });
  const daemon = startDaemonProcess(s);
  const P = subjectRoot(s.space);
  const names = streamNames(s.space);
  const K = 7;
  const colluders: Agent[] = [];
  for (let i = 0; i < K; i++) colluders.push(await s.agent(`c${i}`, { role: `r${i}` }));
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const conns = await Promise.all(colluders.map((c) => connectAs(s.url, c.creds)));
  const bn = await connectAs(s.url, bob.creds);
  const look = await connectAs(s.url, s.deliveryCreds);
  const ctl = await connectAs(s.url, await s.mint("control-caller", { principal: OPERATOR }));
  const dm = (to: Agent, from: Agent) => `${P}.inst.local.${to.name}.local.${from.name}`;
  const task = (role: string, from: Agent) => `${P}.svc.${role}.local.${from.name}`;
  try {
    await daemon.waitForLine(/delivery daemon up/);
    const jsm = await look.jetstreamManager();
    // The honest messages come first, so they are the oldest the colluders' floods pile on.
    const bjs = bn.jetstream();
    for (let i = 0; i < 5; i++) await bjs.publish(dm(alice, bob), BODY);
    for (let i = 0; i < 3; i++) await bjs.publish(dm(colluders[0], bob), BODY);
    for (let i = 0; i < 2; i++) await bjs.publish(task("r0", bob), BODY);

    // Every colluder DMs every other, and hands every other's role tasks (TASK: five roles).
    const pairs = STREAM_LIMITS.dm.maxMsgsPerSubject;
    assert.ok(K * (K - 1) * pairs * BODY.length > STREAM_LIMITS.dm.maxBytes, "DM would fill");
    assert.ok(5 * 4 * pairs * BODY.length > STREAM_LIMITS.task.maxBytes, "TASK would fill");
    await Promise.all(colluders.map(async (from, i) => {
      for (const [j, to] of colluders.entries()) {
        if (j === i) continue;
        await flood(conns[i], dm(to, from), pairs);
        if (i < 5 && j < 5) await flood(conns[i], task(`r${j}`, from), pairs);
      }
    }));

    // The warden brings both streams back under its onset by itself.
    const bytes = async (st: string) => (await jsm.streams.info(st)).state.bytes;
    await waitFor(async () =>
      (await bytes(names.dm)) < WARDEN_ONSET * STREAM_LIMITS.dm.maxBytes &&
      (await bytes(names.task)) < WARDEN_ONSET * STREAM_LIMITS.task.maxBytes, {
      timeoutMs: 30_000,
      what: "DM and TASK under half full",
    });
    const counts = async (st: string, filter: string) =>
      (await jsm.streams.info(st, { subjects_filter: filter })).state.subjects ?? {};
    const dmCounts = await counts(names.dm, `${P}.inst.>`);
    const taskCounts = await counts(names.task, `${P}.svc.>`);
    // Honest: a recipient with a short backlog, a sender with a few DMs to a colluder, a task.
    assert.equal(dmCounts[dm(alice, bob)], 5);
    assert.equal(dmCounts[dm(colluders[0], bob)], 3);
    assert.equal(taskCounts[task("r0", bob)], 2);
    // Each colluder keeps at least its protected backlog (the trim is a level, not a wipe).
    for (const c of colluders) {
      const kept = Object.entries(dmCounts).filter(([k]) =>
        k.startsWith(`${P}.inst.local.${c.name}.`)
      ).reduce((a, [, n]) => a + n, 0);
      assert.ok(kept >= PROTECTED_BACKLOG, `${c.name} keeps ${kept}`);
    }
    // DM and TASK take new messages.
    await bjs.publish(dm(alice, bob), BODY);
    await bjs.publish(task("r1", bob), BODY);

    // The operator can see what was trimmed, and from whom; nothing of alice's.
    const trimmedFrom = new Set<string>();
    let records: TrimRecord[] = [];
    await waitFor(async () => {
      records = (await deliveryRequest(ctl, s.space, OPERATOR, "setAside", {}, {
        service: "delivery-admin",
      }) as { trimmed: TrimRecord[] }).trimmed;
      for (const t of records) trimmedFrom.add(t.recipient);
      return [...trimmedFrom].some((r) => /^local\.c\d$/.test(r)) &&
        [...trimmedFrom].some((r) => /^r\d$/.test(r));
    }, { timeoutMs: 15_000, what: "trim records of a colluder and a role" });
    assert.equal(trimmedFrom.has("local.alice"), false);
    assert.ok(records.every((t) => t.purged > 0));
    assert.match(daemon.stderr(), /storage warden: trimmed \d+ unread DM messages of local\.c\d/);
  } finally {
    for (const nc of [...conns, bn, look, ctl]) await nc.close();
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
