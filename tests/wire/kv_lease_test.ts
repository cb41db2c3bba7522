/**
 * The one KV lease protocol (lib/wire/kv_lease.ts) that the delivery daemon and the manager
 * share, on a real broker: a free key is taken create-only, a vacant row (no lease row) is
 * written over at once, a live holder is waited out until the refusal, a holder proven dead is
 * taken over at once, and release deletes only a row that a fresh read proves ours.
 */
import assert from "node:assert/strict";
import { connect } from "nats";
import {
  acquireKvLease,
  type AcquireKvLeaseOptions,
  KvLease,
  type LeaseRowBase,
} from "../../lib/wire/kv_lease.ts";
import { startTestBroker } from "../_harness/broker.ts";

interface Row extends LeaseRowBase {
  readonly who: string;
}

const isRow = (v: unknown): v is Row =>
  typeof (v as Row)?.who === "string" && typeof (v as Row)?.incarnation === "string";

function options(who: string, inc: string, more: Partial<AcquireKvLeaseOptions<Row>> = {}) {
  const tookOver: Row[] = [];
  const opts: AcquireKvLeaseOptions<Row> = {
    fresh: () => ({ who, incarnation: inc, lock: `lock-${inc}` }),
    waitMs: 0,
    pollMs: 50,
    createFailed: (err) => Promise.reject(err),
    tookOver: (from) => tookOver.push(from),
    refuse: (view) => new Error(`held: ${view.state === "taken" ? view.info.who : view.state}`),
    ...more,
  };
  return { opts, tookOver };
}

Deno.test("kv lease - free, vacant, live, dead holders and release", async () => {
  await using broker = await startTestBroker();
  const nc = await connect({ servers: broker.url });
  try {
    const kv = await nc.jetstream().views.kv("lease", { history: 1, ttl: 30_000 });
    const a = new KvLease(kv, "lease.0", "inc-a", isRow);
    const b = new KvLease(kv, "lease.0", "inc-b", isRow);

    // A row no holder wrote (an answer a member aimed at the key) is vacant: taken at once.
    await kv.put("lease.0", new TextEncoder().encode('{"type":"io.nats.jetstream.api.v1"}'));
    assert.equal((await a.read()).state, "vacant");
    await acquireKvLease(a, options("a", "inc-a").opts);
    assert.equal((await a.read()).state, "held");
    assert.equal((await b.read()).state, "taken");

    // A live holder is waited out for waitMs, then refused with the holder named.
    const started = Date.now();
    await assert.rejects(
      acquireKvLease(b, options("b", "inc-b", { waitMs: 300 }).opts),
      /held: a/,
    );
    assert.ok(Date.now() - started >= 300, "the live holder was waited out");

    // A lock that proves the holder's id dead: taken over at once, and the caller is told.
    const proof = {
      tryTake: () => Promise.resolve(true),
      provesDead: (id: unknown) => id === "lock-inc-a",
    };
    const { opts, tookOver } = options("b", "inc-b", { lock: proof });
    await acquireKvLease(b, opts);
    assert.deepEqual(tookOver.map((r) => r.who), ["a"]);
    assert.equal((await b.read()).state, "held");

    // The old holder's renew fails, and its release leaves the new holder's row alone.
    assert.equal(await a.write(), false);
    assert.equal(await a.release(), false);
    assert.equal((await b.read()).state, "held");
    assert.equal(await b.write(), true);
    assert.equal(await b.release(), true);
    assert.equal((await a.read()).state, "gone");
  } finally {
    await nc.close();
  }
});

Deno.test("kv lease - a lock that proves nothing does not take a live holder's row", async () => {
  await using broker = await startTestBroker();
  const nc = await connect({ servers: broker.url });
  try {
    const kv = await nc.jetstream().views.kv("lease", { history: 1, ttl: 30_000 });
    const a = new KvLease(kv, "lease.0", "inc-a", isRow);
    const b = new KvLease(kv, "lease.0", "inc-b", isRow);
    await acquireKvLease(a, options("a", "inc-a").opts);
    const proof = { tryTake: () => Promise.resolve(true), provesDead: () => false };
    await assert.rejects(acquireKvLease(b, options("b", "inc-b", { lock: proof }).opts), /held: a/);
    assert.equal((await a.read()).state, "held");
  } finally {
    await nc.close();
  }
});
