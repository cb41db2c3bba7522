import assert from "node:assert/strict";
import { AckPolicy, connect } from "nats";
import { restoreStream, snapshotStream } from "../../lib/mesh/snapshot.ts";
import { isCotalError } from "../../lib/errors.ts";
import { startTestBroker } from "../_harness/broker.ts";

Deno.test("mesh - a stream snapshot restores into a fresh broker with its messages, sequences and consumers", async () => {
  await using a = await startTestBroker();
  await using b = await startTestBroker();
  const na = await connect({ servers: a.url });
  const nb = await connect({ servers: b.url });
  try {
    const jsm = await na.jetstreamManager();
    await jsm.streams.add({ name: "BK", subjects: ["bk.>"] });
    await jsm.consumers.add("BK", { durable_name: "dur", ack_policy: AckPolicy.Explicit });
    const js = na.jetstream();
    // Enough data for several chunks.
    const big = crypto.getRandomValues(new Uint8Array(60_000));
    for (let i = 0; i < 30; i++) await js.publish(`bk.${i % 3}`, i % 10 === 0 ? big : `m${i}`);
    await jsm.streams.deleteMessage("BK", 5);

    const chunks: Uint8Array[] = [];
    const header = await snapshotStream(na, "BK", (c) => {
      chunks.push(c.slice());
      return Promise.resolve();
    }, { chunkSize: 16 * 1024 });
    assert.ok(chunks.length > 1, `several chunks: ${chunks.map((c) => c.length)}`);
    assert.equal((header.state as { messages: number }).messages, 29);

    const replay = async function* () {
      for (const c of chunks) yield c;
    };
    const info = await restoreStream(nb, header, replay());
    assert.equal((info as { state: { messages: number } }).state.messages, 29);
    const jsmB = await nb.jetstreamManager();
    const m7 = await jsmB.streams.getMessage("BK", { seq: 7 });
    assert.equal(new TextDecoder().decode(m7.data), "m6");
    await assert.rejects(jsmB.streams.getMessage("BK", { seq: 5 }));
    assert.equal((await jsmB.consumers.info("BK", "dur")).name, "dur");

    // Restoring over an existing stream is refused by the broker, with its reason.
    await assert.rejects(
      restoreStream(nb, header, replay()),
      (e) => isCotalError(e, "snapshot_failed") && /restore of BK/.test(e.message),
    );
    await assert.rejects(
      snapshotStream(na, "NOPE", () => Promise.resolve()),
      (e) => isCotalError(e, "snapshot_failed") && /stream not found/.test(e.message),
    );
  } finally {
    await na.close();
    await nb.close();
  }
});
