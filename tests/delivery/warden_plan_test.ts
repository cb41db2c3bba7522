/**
 * The storage warden's arithmetic: the water level, which recipients and senders a trim cuts,
 * and which DLV members yield. Pure functions, no broker.
 */
import assert from "node:assert/strict";
import {
  planTrim,
  PROTECTED_BACKLOG,
  waterLevel,
  yieldingGroups,
} from "../../lib/delivery/warden.ts";

Deno.test("warden - the water level is the highest cut that fits the budget, never under the floor", () => {
  assert.equal(waterLevel([10, 20, 30], 60, 0), Infinity, "everything fits");
  // min(c, 25) summed: 10 + 20 + 25 = 55 ≤ 56; at 26: 56 ≤ 56; at 27: 57 > 56.
  assert.equal(waterLevel([10, 20, 30], 56, 0), 26);
  assert.equal(waterLevel([100, 100, 100], 30, 64), 64, "the floor holds even over budget");
  assert.equal(waterLevel([], 0, 64), Infinity);
});

Deno.test("warden - a trim cuts the largest recipients to one level and, inside one, its largest senders first", () => {
  const S = (to: string, from: string) => `p.inst.local.${to}.local.${from}`;
  const counts: Record<string, number> = {
    // Seven colluders' pairs: 256 each.
    ...Object.fromEntries(
      Array.from({ length: 6 }, (_, i) => [S("c0", `c${i + 1}`), 256]),
    ),
    ...Object.fromEntries(
      Array.from({ length: 6 }, (_, i) => [S("c1", `c${i === 0 ? 0 : i + 1}`), 256]),
    ),
    // An honest sender's three DMs to a colluder, and an honest recipient's small backlog.
    [S("c0", "bob")]: 3,
    [S("alice", "bob")]: 5,
    "p.inst.not-a-dm": 9,
  };
  const groupOf = (s: string) => {
    const t = s.split(".").slice(2);
    return t.length === 4 ? `${t[0]}.${t[1]}` : undefined;
  };
  const steps = planTrim(counts, groupOf, 500);
  // Recipients c0 (1539) and c1 (1536) are cut to one level: 5 + 2L ≤ 500 → L = 247.
  const cut = new Map(steps.map((s) => [s.subject, s.keep]));
  assert.equal(cut.has(S("alice", "bob")), false, "a small backlog is never trimmed");
  assert.equal(cut.has(S("c0", "bob")), false, "a sender with a few DMs keeps them");
  assert.equal(cut.has("p.inst.not-a-dm"), false, "a subject of no recipient is left alone");
  const keptOf = (to: string) =>
    Object.entries(counts).filter(([s]) => groupOf(s)?.endsWith(`.${to}`))
      .reduce((a, [s, n]) => a + (cut.get(s) ?? n), 0);
  assert.ok(keptOf("c0") <= 247 && keptOf("c0") >= 247 - 6, `c0 keeps ${keptOf("c0")}`);
  assert.ok(keptOf("c1") <= 247 && keptOf("c1") >= 247 - 6, `c1 keeps ${keptOf("c1")}`);
  // However many colluders, each keeps its protected backlog.
  const many = Object.fromEntries(
    Array.from({ length: 50 }, (_, i) => [S(`c${i}`, "x"), 256]),
  );
  for (const s of planTrim(many, groupOf, 100)) assert.equal(s.keep, PROTECTED_BACKLOG);
});

Deno.test("warden - under pressure the DLV members with the largest backlogs yield, readers do not", () => {
  const counts: Record<string, number> = { "p.dlv.local.reader.u1": 3 };
  for (let i = 0; i < 20; i++) counts[`p.dlv.local.h${i}.u`] = 512;
  const y = yieldingGroups(counts, 4_000);
  assert.equal(y.has("p.dlv.local.reader.u1"), false);
  assert.equal(y.size, 20);
  assert.equal(yieldingGroups(counts, 20_000).size, 0, "nothing yields while all fits");
});
