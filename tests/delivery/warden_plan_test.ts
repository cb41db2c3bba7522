/**
 * The storage warden's arithmetic: the water level, which senders and pairs a trim cuts (in
 * bytes), and which DLV members yield. Pure functions, no broker.
 */
import assert from "node:assert/strict";
import {
  type Pair,
  planTrim,
  PROTECTED_SENDER_BYTES,
  type StoredMsg,
  waterLevel,
  yieldingGroups,
} from "../../lib/delivery/warden_plan.ts";
import { IDS_PER_SUBJECT, StoreIndex } from "../../lib/delivery/warden_index.ts";

const KIB = 1024;
const S = (to: string, from: string) => `p.inst.local.${to}.local.${from}`;
const pairOf = (s: string): Pair | undefined => {
  const t = s.split(".").slice(2);
  return t.length === 4 ? { recipient: `${t[0]}.${t[1]}`, sender: `${t[2]}.${t[3]}` } : undefined;
};

/** A stream's messages, in the order the entries give, with increasing sequences. */
function stream(entries: [subject: string, count: number, bytes: number][]): StoredMsg[] {
  const out: StoredMsg[] = [];
  let seq = 1;
  for (const [subject, count, bytes] of entries) {
    for (let i = 0; i < count; i++) out.push({ subject, seq: seq++, bytes });
  }
  return out;
}

Deno.test("warden - the water level is the highest cut that fits the budget, never under the floor", () => {
  assert.equal(waterLevel([10, 20, 30], 60, 0), Infinity, "everything fits");
  // min(c, 25) summed: 10 + 20 + 25 = 55 ≤ 56; at 26: 56 ≤ 56; at 27: 57 > 56.
  assert.equal(waterLevel([10, 20, 30], 56, 0), 26);
  assert.equal(waterLevel([100, 100, 100], 30, 64), 64, "the floor holds even over budget");
  assert.equal(waterLevel([], 0, 64), Infinity);
});

Deno.test("warden - red team 10's collusion: colluders that also DM the victim cannot cut an honest sender's 1 KiB DMs; they lose their own oldest, by bytes", () => {
  // bob's 100 × 1 KiB DMs to an offline alice come first; ten colluders then send alice and each
  // other 60 KiB DMs until DM is past half full.
  const colluders = Array.from({ length: 10 }, (_, i) => `c${i}`);
  const entries: [string, number, number][] = [[S("alice", "bob"), 100, KIB]];
  for (const c of colluders) {
    entries.push([S("alice", c), 256, 60 * KIB]);
    for (const d of colluders) if (d !== c) entries.push([S(d, c), 40, 60 * KIB]);
  }
  const msgs = stream(entries);
  const total = msgs.reduce((a, m) => a + m.bytes, 0);
  const steps = planTrim(msgs, pairOf, total - 200 * 2 ** 20);
  assert.ok(steps.length > 0);
  assert.equal(steps.some((s) => s.sender === "local.bob"), false, "bob's DMs are all kept");
  const removed = steps.reduce((a, s) => a + s.bytes, 0);
  assert.ok(removed >= total - 200 * 2 ** 20, `removed ${removed}`);
  // Every colluder ends at the same level, in bytes; the largest pair of each (to alice) goes first.
  const kept = new Map<string, number>();
  for (const m of msgs) {
    const p = pairOf(m.subject)!;
    const cut = steps.find((s) => s.subject === m.subject);
    if (!cut || m.seq >= cut.before) kept.set(p.sender, (kept.get(p.sender) ?? 0) + m.bytes);
  }
  const levels = colluders.map((c) => kept.get(`local.${c}`)!);
  assert.ok(Math.max(...levels) - Math.min(...levels) <= 60 * KIB, `levels ${levels}`);
  for (const s of steps) {
    assert.equal(s.firstSeq < s.before && s.lastSeq < s.before, true, "only the oldest go");
  }
});

Deno.test("warden - a sender is never cut below its protected bytes, however many colluders; a short-message sender keeps thousands", () => {
  const entries: [string, number, number][] = [[S("alice", "bob"), 3_000, KIB]];
  for (let i = 0; i < 200; i++) entries.push([S(`v${i}`, `c${i}`), 256, 64 * KIB]);
  const msgs = stream(entries);
  const steps = planTrim(msgs, pairOf, 3_000 * 2 ** 20);
  assert.equal(steps.some((s) => s.sender === "local.bob"), false, "3000 × 1 KiB stays");
  for (const s of steps) {
    const kept = (256 - s.messages) * 64 * KIB;
    assert.ok(kept <= PROTECTED_SENDER_BYTES && kept > PROTECTED_SENDER_BYTES - 64 * KIB);
  }
});

Deno.test("warden - inside a sender its largest pairs yield first; subjects of no pair are left alone", () => {
  const msgs = stream([
    [S("a", "x"), 200, 64 * KIB], // 12.5 MiB to one recipient
    [S("b", "x"), 5, 64 * KIB], // a few to another
    [S("a", "y"), 100, 64 * KIB],
    ["p.inst.not-a-dm", 50, 64 * KIB],
  ]);
  const steps = planTrim(msgs, pairOf, 4 * 2 ** 20);
  assert.deepEqual(steps.map((s) => s.subject), [S("a", "x")]);
  assert.equal(planTrim(msgs, pairOf, 0).length, 0, "nothing to remove, nothing cut");
});

Deno.test("warden - under pressure the DLV members with the largest backlogs yield, readers do not", () => {
  const counts: Record<string, number> = { "p.dlv.local.reader.u1": 3 };
  for (let i = 0; i < 20; i++) counts[`p.dlv.local.h${i}.u`] = 512;
  const y = yieldingGroups(counts, 4_000);
  assert.equal(y.has("p.dlv.local.reader.u1"), false);
  assert.equal(y.size, 20);
  assert.equal(yieldingGroups(counts, 20_000).size, 0, "nothing yields while all fits");
});

Deno.test("warden - the index keeps each subject's newest messages the stream still holds, and knows a replayed id", () => {
  const index = new StoreIndex();
  const a = S("alice", "bob");
  const b = S("carol", "bob");
  for (let seq = 1; seq <= 5; seq++) index.add(a, seq, 100, `m${seq}`);
  index.add(b, 6, 200, "n1");
  assert.equal(index.seen(a, "m2"), true);
  assert.equal(index.seen(b, "m2"), false, "an id is a replay only in its own pair");
  // Alice read her two oldest; carol read everything.
  index.reconcile({ [a]: 3 });
  assert.deepEqual([...index.messages()].map((m) => m.seq), [3, 4, 5]);
  assert.equal(index.size, 3);
  assert.equal(index.seen(a, "m1"), true, "a read message's id is still known");
  index.cut(a, 5);
  assert.deepEqual([...index.messages()].map((m) => [m.seq, m.bytes]), [[5, 100]]);
});

Deno.test("warden - the index remembers a bounded number of ids per pair, the newest", () => {
  const index = new StoreIndex();
  const a = S("alice", "bob");
  for (let seq = 1; seq <= IDS_PER_SUBJECT + 10; seq++) index.add(a, seq, 1, `m${seq}`);
  assert.equal(index.seen(a, "m1"), false, "the oldest ids are forgotten");
  assert.equal(index.seen(a, `m${IDS_PER_SUBJECT + 10}`), true);
  assert.equal(index.seen(a, "m11"), true);
});
