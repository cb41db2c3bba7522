/**
 * The durable backstop's throughput and latency against raw JetStream on the same broker, in
 * the same run: durable copies delivered per second to 1, 10 and 50 members, end-to-end
 * durable latency at moderate load, and the daemon's resident memory.
 *
 *   deno run -A tests/bench/delivery_bench.ts           # print the table
 *   deno run -A tests/bench/delivery_bench.ts --write   # also update docs/BENCHMARKS.md
 *
 * The daemon runs as a real process under its own permission row (as in production). Each copy
 * to a member whose ACL row the daemon knows is one JetStream write (the fan-out writes the
 * framed DLV copy itself); until stop 28 it was two (an INBOX entry, then the reader's copy).
 * Not a test: timings are reported, never asserted.
 */
import type { NatsConnection } from "nats";
import { percentile, runContext, writeSection } from "./_report.ts";
import { decodeFrame, deliveryRequest } from "../../lib/delivery/mod.ts";
import {
  buildMessage,
  chatSubject,
  dlvDurableName,
  encodeMessage,
  instSubject,
  streamNames,
} from "../../lib/wire/mod.ts";
import {
  type Agent,
  connectAs,
  startDaemonProcess,
  startDeliverySpace,
  waitSettled,
} from "../delivery/_helpers.ts";

const RAW_PER_ROUND = 2_000;
const IN_FLIGHT = 256;
/** Members -> messages per round; DLV keeps MEMBER_BACKLOG_CAP (512) unread per member. */
const PLAN: [number, number, number][] = [[1, 500, 7], [10, 500, 5], [50, 100, 5]];
const LATENCY_RATE = 100;
const LATENCY_SECONDS = 5;
const LATENCY_MEMBERS = 10;

function rssMb(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

async function pipelined(n: number, publish: (i: number) => Promise<unknown>): Promise<void> {
  const inflight = new Set<Promise<unknown>>();
  for (let i = 0; i < n; i++) {
    const p: Promise<unknown> = publish(i).finally(() => inflight.delete(p));
    inflight.add(p);
    if (inflight.size >= IN_FLIGHT) await Promise.race(inflight);
  }
  await Promise.all(inflight);
}

const s = await startDeliverySpace({ prefix: "bench" });
const sender = await s.agent("sender", { allowSubscribe: ["raw", "b1", "b10", "b50", "lat"] });
const sn = await connectAs(s.url, sender.creds);
const dn = await connectAs(s.url, s.deliveryCreds);
const jsm = await dn.jetstreamManager();
const names = streamNames(s.space);

function envelope(channel: string, i: number): Uint8Array {
  return encodeMessage(buildMessage({
    space: s.space,
    from: { id: sender.id, name: sender.name },
    channel,
    text: `benchmark message ${i} with a body of a typical short chat line`,
  }));
}

// Raw: pipelined JetStream publishes of the same envelope as DMs to provisioned sinks whose
// durables nobody pulls (so DM stores them; the storage warden reads each once, as it reads every DM), interleaved with the
// daemon's rounds so machine load hits both alike. A pair holds 256 DMs: 2,000 spread over 8
// sinks, and DM purged after each raw round (outside the timed part).
const SINKS = await Promise.all(Array.from({ length: 8 }, (_, k) => s.agent(`sink${k}`)));
const purger = await connectAs(s.url, await s.mint("purger"));
async function rawRound(n: number, tag: string): Promise<number> {
  const js = sn.jetstream();
  const subjects = SINKS.map((k) => instSubject(s.space, k.principal, sender.principal));
  const t0 = performance.now();
  await pipelined(
    n,
    (i) => js.publish(subjects[i % SINKS.length], envelope("raw", i), { msgID: `raw-${tag}-${i}` }),
  );
  const rate = n / ((performance.now() - t0) / 1000);
  await (await purger.jetstreamManager()).streams.purge(names.dm);
  return rate;
}

const daemon = startDaemonProcess(s);
await daemon.waitForLine(/delivery daemon up/);
await new Promise((r) => setTimeout(r, 1000));
const startRss = rssMb(daemon.child.pid);
let peakRss = startRss;
const sampler = setInterval(() => peakRss = Math.max(peakRss, rssMb(daemon.child.pid)), 100);

async function members(count: number, channel: string): Promise<Agent[]> {
  const out: Agent[] = [];
  for (let i = 0; i < count; i++) {
    const a = await s.agent(`m${channel}_${i}`, { allowSubscribe: [channel], allowPublish: [] });
    const nc = await connectAs(s.url, a.creds);
    await deliveryRequest(nc, s.space, a.principal, "durableJoin", { channel });
    await nc.close();
    out.push(a);
  }
  return out;
}

async function dlvWritten(): Promise<number> {
  return (await jsm.streams.info(names.dlv)).state.last_seq;
}

const throughput: { members: number; copies: number; rate: number; raw: number }[] = [];
/**
 * Reads and acks every copy waiting in the members' DLV durables (outside the timed part): a
 * member keeps at most MEMBER_BACKLOG_CAP (512) unread copies, so rounds to the same members
 * need them read in between, as an online member would.
 */
async function drain(list: Agent[]): Promise<void> {
  for (const m of list) {
    const nc = await connectAs(s.url, m.creds);
    try {
      const c = await nc.jetstream().consumers.get(names.dlv, dlvDurableName(m.principal, m.uid));
      for (;;) {
        const pending = (await c.info()).num_pending;
        if (pending === 0) break;
        const batch = await c.fetch({ max_messages: Math.min(pending, 500), expires: 5_000 });
        for await (const msg of batch) msg.ack();
      }
    } finally {
      await nc.close();
    }
  }
}

for (const [count, perRound, rounds] of PLAN) {
  const channel = `b${count}`;
  const group = await members(count, channel);
  const rates: number[] = [];
  const raws: number[] = [];
  for (let r = 0; r < rounds; r++) {
    await drain(group);
    await waitSettled(s, 60_000);
    raws.push(await rawRound(RAW_PER_ROUND, `${channel}r${r}`));
    const before = await dlvWritten();
    const want = before + perRound * count;
    const js = sn.jetstream();
    const subject = chatSubject(s.space, sender.principal, channel);
    const t0 = performance.now();
    await pipelined(
      perRound,
      (i) => js.publish(subject, envelope(channel, i), { msgID: `${channel}-${r}-${i}` }),
    );
    const deadline = Date.now() + 120_000;
    while (await dlvWritten() < want) {
      if (Date.now() > deadline) {
        throw new Error(
          `round ${r} of ${count} members: copies stopped at ${await dlvWritten()} of ${want}`,
        );
      }
      await new Promise((res) => setTimeout(res, 10));
    }
    rates.push((perRound * count) / ((performance.now() - t0) / 1000));
  }
  throughput.push({
    members: count,
    copies: perRound * count * rounds,
    rate: percentile(rates, 50),
    raw: percentile(raws, 50),
  });
  console.error(
    `delivery bench: ${count} members: ${Math.round(percentile(rates, 50))} copies/s, raw ${
      Math.round(percentile(raws, 50))
    } msg/s`,
  );
}

// Latency: a steady trickle to 10 consuming members; publish-to-DLV-receive per copy.
const latMembers = await members(LATENCY_MEMBERS, "lat");
const lat: number[] = [];
const readers: NatsConnection[] = [];
const stops: (() => void)[] = [];
for (const m of latMembers) {
  const nc = await connectAs(s.url, m.creds);
  readers.push(nc);
  const c = await nc.jetstream().consumers.get(names.dlv, dlvDurableName(m.principal, m.uid));
  const it = await c.consume({ max_messages: 64 });
  stops.push(() => it.stop());
  (async () => {
    for await (const msg of it) {
      const f = decodeFrame(msg.headers, msg.data);
      if (f.ok) lat.push(Date.now() - f.frame.msg.ts);
      msg.ack();
    }
  })();
}
await waitSettled(s, 60_000);
{
  const js = sn.jetstream();
  const subject = chatSubject(s.space, sender.principal, "lat");
  const total = LATENCY_RATE * LATENCY_SECONDS;
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / LATENCY_RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    await js.publish(subject, envelope("lat", i), { msgID: `lat-${i}` });
  }
  const deadline = Date.now() + 20_000;
  while (lat.length < total * LATENCY_MEMBERS && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
}
for (const stop of stops) stop();
clearInterval(sampler);
const idleRss = rssMb(daemon.child.pid);
daemon.kill();
await daemon.exited;
for (const nc of [...readers, sn, dn, purger]) await nc.close();
await s[Symbol.asyncDispose]();

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const rows = throughput.map((t) =>
  `| ${t.members} | ${fmt(t.copies)} | ${fmt(t.rate)} copies/s | ${fmt(t.raw)} msg/s | ${
    (100 * t.rate / t.raw).toFixed(0)
  }% |`
);
const p50 = percentile(lat, 50);
const p99 = percentile(lat, 99);
const md = `## lib/delivery: durable copies per second vs raw JetStream publish

${
  runContext("deno run -A tests/bench/delivery_bench.ts --write")
} One operator-mode broker; the daemon is a real process under its \`cotal-delivery\` permission row (V8 flags included); the sender publishes pipelined (${IN_FLIGHT} acked publishes in flight). A copy is counted when its framed copy is stored in DLV (the stream's last sequence). Raw = the same envelope published the same way as DMs to eight provisioned sinks nobody pulls (DM stores them and the daemon's storage warden reads each once, as it reads every DM; no member reads them; purged after each raw round), ${
  fmt(RAW_PER_ROUND)
} messages before every daemon round, so both see the same machine load; each column is the median of its rounds. Each copy to a member whose ACL row the daemon knows costs one JetStream write and its ack (the fan-out writes the framed DLV copy itself, under the copy id the reader would use); a member with no row yet gets an INBOX entry the reader copies later. The daemon exceeds one publisher's rate when the broker has headroom a single pipelined publisher does not use. Measured on the same machine just before the change (copies through INBOX and the reader): 4,133 / 6,042 / 8,539 copies/s at 1 / 10 / 50 members, 19% / 26% / 31% of raw.

| members | copies | durable copies delivered | raw publish, same rounds | copies vs raw |
|---:|---:|---:|---:|---:|
${rows.join("\n")}

End-to-end durable latency (publish → framed copy received from the member's \`dlv_\` durable) at ${LATENCY_RATE} msg/s to ${LATENCY_MEMBERS} consuming members for ${LATENCY_SECONDS} s (${
  fmt(lat.length)
} copies): **p50 ${p50} ms**, p99 ${p99} ms.

Daemon resident memory: **${startRss.toFixed(1)} MB** idle after start, peak **${
  peakRss.toFixed(1)
} MB** during the bursts above, ${
  idleRss.toFixed(1)
} MB at the end (three connections: the backstop, and the membership feed's observer and writer).

Targets: at 10 members ≥ 30% of the raw publish rate in copies per second, p50 ≤ 25 ms at moderate load, daemon ≤ 80 MB RSS.`;
console.log(md);
if (Deno.args.includes("--write")) await writeSection("delivery", md);
