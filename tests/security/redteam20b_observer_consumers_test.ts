/**
 * Red team 20b: an observer cred (`cotal mint --profile observer`, what `cotal tail` uses) may
 * create any consumer on CHAT (`$JS.API.CONSUMER.CREATE.CHAT_<s>` and `.>`): the relay guard's
 * "no durable, an idle threshold of at most 60 s" (red team 20a) binds sandboxed agents only.
 * Connected straight to the broker, it creates durable consumers until CHAT's frozen cap of
 * 1024 per stream, and they never go away. Every member's history consumer (`chathist_`) is
 * then refused, and so is the delivery daemon's `readHistory`, for as long as they stay.
 *
 * The defence holds when, after the flood, an agent can still read a channel's history
 * through its pinned history consumer: now once the delivery daemon's consumer janitor has
 * swept (once a minute, lib/delivery/consumer_janitor.ts). A flood of consumers that do expire,
 * each kept busy by the attacker, is not swept: that attack is kept below, skipped.
 */
import assert from "node:assert/strict";
import { AckPolicy, DeliverPolicy, type JetStreamManager, type NatsConnection } from "nats";
import { JANITOR_INTERVAL_MS } from "../../lib/delivery/consumer_janitor.ts";
import { chathistDurableName, streamNames, subjectRoot } from "../../lib/wire/mod.ts";
import { waitFor } from "../_harness/broker.ts";
import {
  type Agent,
  connectAs,
  credSubject,
  type DeliverySpace,
  startDaemonProcess,
  startDeliverySpace,
} from "../delivery/_helpers.ts";

/** Creates consumers until the broker refuses; how many, and the refusal. */
async function flood(
  jsm: JetStreamManager,
  stream: string,
  config: (i: number) => Record<string, unknown>,
): Promise<{ made: string[]; refusal: string }> {
  const made: string[] = [];
  for (let i = 0; i < 1100; i++) {
    try {
      made.push((await jsm.consumers.add(stream, config(i))).name);
    } catch (e) {
      return { made, refusal: String((e as Error).message) };
    }
  }
  return { made, refusal: "" };
}

/** Bob's own history consumer, pinned by name and filter, as the endpoint creates it: "" or why not. */
async function bobsHistory(s: DeliverySpace, bob: Agent, bn: NatsConnection): Promise<string> {
  const jsm = await bn.jetstreamManager();
  const chat = streamNames(s.space).chat;
  const name = chathistDurableName(bob.principal, bob.uid);
  try {
    await jsm.consumers.add(chat, {
      name,
      filter_subject: `${subjectRoot(s.space)}.chat.*.*.general`,
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.All,
      inactive_threshold: 30_000_000_000,
      mem_storage: true,
      num_replicas: 1,
    });
    await jsm.consumers.delete(chat, name).catch(() => {});
    return "";
  } catch (e) {
    return String((e as Error).message);
  }
}

Deno.test("redteam20b - an observer's durable consumers do not keep CHAT's consumer cap from members past the janitor's sweep", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20bobs" });
  const daemon = startDaemonProcess(s);
  const bob = await s.agent("bob");
  const on = await connectAs(s.url, await s.mint("observer"));
  const bn = await connectAs(s.url, bob.creds);
  try {
    await daemon.waitForLine(/delivery daemon up/, 40_000);
    const chat = streamNames(s.space).chat;
    const { made, refusal } = await flood(await on.jetstreamManager(), chat, (i) => ({
      durable_name: `obs${i}`,
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.New,
    }));
    console.log(`observer made ${made.length} durable consumers on ${chat}; then: ${refusal}`);
    assert.notEqual(await bobsHistory(s, bob, bn), "", "the flood filled the cap (the attack ran)");
    let err = "";
    await waitFor(async () => (err = await bobsHistory(s, bob, bn)) === "", {
      what: "bob's history consumer accepted after the janitor's sweep",
      timeoutMs: JANITOR_INTERVAL_MS + 30_000,
      intervalMs: 2_000,
    }).catch(() => {});
    assert.equal(err, "", `bob's history consumer was still refused: ${err}`);
    // The janitor says what it did once its sweep ends (bob got in at its first deletions).
    await waitFor(() => /consumer janitor: deleted \d+ consumers/.test(daemon.stderr()), {
      what: "the janitor's report in the daemon's log",
      timeoutMs: 30_000,
    });
  } finally {
    await on.close().catch(() => {});
    await bn.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test({
  name:
    "redteam20b - an observer's busy short-idle consumers do not keep CHAT's consumer cap from members (skipped: known gap, not fixed; a consumer that expires after idling and is kept busy is what the operator's own clients create, so the janitor cannot tell it from them, and observer and admin creds are minted by the operator only)",
  ignore: true,
}, async () => {
  await using s = await startDeliverySpace({ prefix: "rt20bbusy" });
  const daemon = startDaemonProcess(s);
  const bob = await s.agent("bob");
  const obsCreds = await s.mint("observer");
  const on = await connectAs(s.url, obsCreds);
  const bn = await connectAs(s.url, bob.creds);
  let busy: ReturnType<typeof setInterval> | undefined;
  try {
    await daemon.waitForLine(/delivery daemon up/, 40_000);
    const chat = streamNames(s.space).chat;
    const ojsm = await on.jetstreamManager();
    const { made } = await flood(ojsm, chat, (i) => ({
      name: `busy${i}`,
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.New,
      inactive_threshold: 60_000_000_000,
    }));
    // Each one pulled every 20 s (raw pull requests, answered on one wildcard subscription:
    // a subscription per pull would pass the cred's subscription cap): never idle a minute.
    const inbox = `_INBOX_${credSubject(obsCreds)}.busy`;
    on.subscribe(`${inbox}.>`, { callback: () => {} });
    const pullAll = () => {
      for (const name of made) {
        on.publish(
          `$JS.API.CONSUMER.MSG.NEXT.${chat}.${name}`,
          JSON.stringify({ batch: 1, expires: 5_000_000_000 }),
          { reply: `${inbox}.${name}` },
        );
      }
    };
    pullAll();
    busy = setInterval(pullAll, 20_000);
    await new Promise((r) => setTimeout(r, 2 * JANITOR_INTERVAL_MS + 10_000));
    assert.equal(await bobsHistory(s, bob, bn), "", "bob's history consumer is refused");
  } finally {
    clearInterval(busy);
    await on.close().catch(() => {});
    await bn.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
