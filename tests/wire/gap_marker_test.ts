/**
 * The gap marker's body: a channel gap, a DM trim naming its sender (`from`), and what is not
 * a marker (an endpoint surfaces only a version-1 body it can trust the shape of).
 */
import assert from "node:assert/strict";
import { parseGapMarker } from "../../lib/wire/mod.ts";

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
const end = (seq: number, channel = "general") => ({ msgId: "m", channel, seq, at: 1 });

Deno.test("gap marker - a channel gap and a DM trim parse; a trim carries its sender in from", () => {
  const base = { version: 1, member: "local.alice", lifecycleUid: "u1", count: 3 };
  const gap = parseGapMarker(enc({ ...base, first: end(4), last: end(9) }));
  assert.equal(gap?.count, 3);
  assert.equal(gap?.from, undefined);
  const trim = parseGapMarker(
    enc({ ...base, from: "local.c1", first: end(10, ""), last: end(40, "") }),
  );
  assert.equal(trim?.from, "local.c1");
  assert.equal(trim?.last.seq, 40);
});

Deno.test("gap marker - refused: a non-string from, a zero count, another version, not JSON", () => {
  const base = { version: 1, member: "local.alice", lifecycleUid: "u1", count: 3 };
  const ends = { first: end(1), last: end(2) };
  assert.equal(parseGapMarker(enc({ ...base, ...ends, from: 7 })), undefined);
  assert.equal(parseGapMarker(enc({ ...base, ...ends, count: 0 })), undefined);
  assert.equal(parseGapMarker(enc({ ...base, ...ends, version: 2 })), undefined);
  assert.equal(parseGapMarker(new TextEncoder().encode("not json")), undefined);
});
