/**
 * The delivery lease's keeper on a real broker, without the rest of the daemon: what each doubt
 * about the lease row leads to. A row no holder wrote is written back at once; a row that
 * vanished is re-acquired and serving resumes; a row another holder took ends this daemon
 * without touching the successor's row; a row that is still ours is adopted.
 */
import assert from "node:assert/strict";
import { LEASE_KEY } from "../../lib/delivery/constants.ts";
import { DeliveryLease } from "../../lib/delivery/lease.ts";
import { LeaseKeeper, type LeaseKeeperHost } from "../../lib/delivery/lease_keeper.ts";
import { bucketNames } from "../../lib/wire/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { startDeliverySpace } from "./_helpers.ts";

function recordingHost() {
  const calls: string[] = [];
  const lines: string[] = [];
  let ready = false;
  const host: LeaseKeeperHost = {
    get ready() {
      return ready;
    },
    arm: () => {
      calls.push("arm");
      ready = true;
      return Promise.resolve();
    },
    disarm: () => {
      calls.push("disarm");
      ready = false;
      return Promise.resolve();
    },
    stopping: () => false,
    taken: (reason) => {
      calls.push(`taken: ${reason}`);
      return Promise.resolve();
    },
    log: {
      info: (l) => lines.push(l),
      warn: (l) => lines.push(l),
      error: (l) => lines.push(l),
    },
  };
  return { host, calls, lines, setReady: (r: boolean) => (ready = r) };
}

Deno.test("delivery lease keeper - vacant, vanished, taken and still-ours rows each get their answer", async () => {
  await using s = await startDeliverySpace({ prefix: "keeper" });
  const nc = await connectBroker({ servers: s.url, creds: s.deliveryCreds });
  try {
    const bucket = bucketNames(s.space).delivery;
    const kv = await nc.jetstream().views.kv(bucket, { bindOnly: true });
    const ours = await DeliveryLease.bind(nc, bucket, "local.d1", "inc-1");
    assert.equal(await ours.acquire(), true);
    const { host, calls, lines, setReady } = recordingHost();
    const keeper = new LeaseKeeper(ours, host);

    // Still ours: adopted, and a quiet daemon serves again.
    await keeper.decide("a check");
    assert.deepEqual(calls, ["arm"]);

    // A row no holder wrote (what an aimed broker answer leaves): ours again at once.
    await kv.put(LEASE_KEY, new TextEncoder().encode('{"type":"io.nats.jetstream.api.v1"}'));
    await keeper.decide("an aimed answer");
    assert.equal((await ours.read()).state, "held");
    assert.ok(
      lines.some((l) => /overwritten by no holder \(an aimed answer\); wrote it back/.test(l)),
    );
    assert.deepEqual(calls, ["arm"], "a serving daemon keeps serving");

    // The row vanished: re-acquired, after going quiet for the moment it was not provably ours.
    await kv.purge(LEASE_KEY);
    await keeper.decide("a purge");
    assert.equal((await ours.read()).state, "held");
    assert.deepEqual(calls, ["arm", "disarm", "arm"]);
    assert.ok(lines.some((l) => /vanished \(a purge\); re-acquired it/.test(l)));

    // Another holder took it: this daemon ends and leaves the successor's row as it is.
    await kv.purge(LEASE_KEY);
    const other = await DeliveryLease.bind(nc, bucket, "local.d2", "inc-2");
    assert.equal(await other.acquire(), true);
    setReady(true);
    await keeper.decide("a successor");
    assert.deepEqual(calls.slice(3), [
      "disarm",
      "taken: lost the delivery lease (a successor); another daemon serves the space",
    ]);
    const row = await other.read();
    assert.equal(row.state, "held", "the successor's row is its own");
    keeper.stop();
  } finally {
    await nc.close();
  }
});
