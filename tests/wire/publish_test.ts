import assert from "node:assert/strict";
import { connect } from "nats";
import { isCotalError } from "../../lib/errors.ts";
import {
  buildMessage,
  chatSubject,
  encodedSize,
  instSubject,
  publishMessage,
  setupSpaceStreams,
  streamNames,
  subjectForMessage,
  svcSubject,
} from "../../lib/wire/mod.ts";
import { plainConfig, startTestBroker, uniqueSpace } from "../_harness/broker.ts";

const alice = { owner: "local", actor: "alice" };
const from = { id: "local.alice", name: "Alice" };

Deno.test("wire - subjectForMessage derives the subject from the envelope", () => {
  const m = (r: Record<string, string>) =>
    buildMessage({ space: "my space", from, text: "x", ...r });
  assert.equal(
    subjectForMessage(m({ channel: "team.a" })),
    chatSubject("my space", alice, "team.a"),
  );
  assert.equal(
    subjectForMessage(m({ to: "local.bob" })),
    instSubject("my space", { owner: "local", actor: "bob" }, alice),
  );
  assert.equal(subjectForMessage(m({ toService: "rev" })), svcSubject("my space", "rev", alice));
});

Deno.test("wire - publishMessage checks the exact size against the broker's max_payload", async () => {
  const maxPayload = 4096;
  await using broker = await startTestBroker({
    config: (ctx) => plainConfig(ctx) + `max_payload: ${maxPayload}\n`,
  });
  const space = uniqueSpace("pub");
  await setupSpaceStreams({ servers: broker.url, space });
  const nc = await connect({ servers: broker.url });
  try {
    assert.equal(nc.info?.max_payload, maxPayload);
    const sized = (n: number) => {
      const base = buildMessage({ space, from, channel: "general", text: "", id: "fixed-id-1" });
      return buildMessage({
        space,
        from,
        channel: "general",
        id: "fixed-id-1",
        ts: base.ts,
        text: "a".repeat(n - encodedSize(base)),
      });
    };
    const exact = sized(maxPayload);
    assert.equal(encodedSize(exact), maxPayload);
    // The broker accepts a message of exactly max_payload bytes: our count is not low.
    const ack = await publishMessage(nc, exact);
    assert.equal(ack.seq, 1);
    const over = sized(maxPayload + 1);
    await assert.rejects(
      publishMessage(nc, { ...over, id: "fixed-id-2" }),
      (e: unknown) => isCotalError(e, "message_too_large") && /4096/.test((e as Error).message),
    );
    const info = await (await nc.jetstreamManager()).streams.info(streamNames(space).chat);
    assert.equal(info.state.messages, 1, "the oversized message was never sent");
    // Same id again: JetStream's Nats-Msg-Id dedup collapses the retry.
    assert.equal((await publishMessage(nc, exact)).duplicate, true);
  } finally {
    await nc.close();
  }
});
