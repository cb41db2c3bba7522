/** The per-cred connection cap's choice: which connections of a cred over the cap are cut. */
import assert from "node:assert/strict";
import { connectionsOverCap } from "../../lib/delivery/conn_cap.ts";
import type { ConnRecord } from "../../lib/delivery/connz.ts";

const conn = (cid: number, user?: string): ConnRecord => ({
  cid,
  serverId: "NS",
  ...(user ? { user } : {}),
  subs: [],
  subCount: 0,
});

Deno.test("conn cap - a cred over the cap loses its newest connections; others and unattributed ones are untouched", () => {
  const conns = [
    ...[5, 1, 9, 3, 7].map((cid) => conn(cid, "UA")),
    ...[2, 4].map((cid) => conn(cid, "UB")),
    conn(11),
    conn(12),
    conn(13),
  ];
  assert.deepEqual(connectionsOverCap(conns, 3).map((c) => c.cid), [9, 7]);
  assert.deepEqual(connectionsOverCap(conns, 5), []);
  assert.deepEqual(connectionsOverCap(conns, 0).map((c) => c.cid).sort((a, b) => a - b), [
    1,
    2,
    3,
    4,
    5,
    7,
    9,
  ]);
});
