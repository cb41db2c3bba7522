/**
 * Red team 20b: an observer cred (`cotal mint --profile observer`, what `cotal tail` uses) may
 * create any consumer on CHAT (`$JS.API.CONSUMER.CREATE.CHAT_<s>` and `.>`): the relay guard's
 * "no durable, an idle threshold of at most 60 s" (red team 20a) binds sandboxed agents only.
 * Connected straight to the broker, it creates durable consumers until CHAT's frozen cap of
 * 1024 per stream, and they never go away. Every member's history consumer (`chathist_`) is
 * then refused, and so is the delivery daemon's `readHistory`, for as long as they stay.
 *
 * Since red team 30 an observer or admin cred makes one consumer only, named for itself
 * (`hist_<its key>`), so both floods below are refused at their first create. The consumer
 * janitor (lib/delivery/consumer_janitor.ts) stays behind it, deleting stray consumers that
 * never expire: it is exercised here with the one cred that may still make them, the delivery
 * daemon's own.
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

Deno.test("redteam20b - an observer cannot make consumers to fill CHAT's cap: the flood is refused at its first create", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20bobs" });
  const bob = await s.agent("bob");
  const obsCreds = await s.mint("observer");
  const on = await connectAs(s.url, obsCreds);
  const bn = await connectAs(s.url, bob.creds);
  try {
    const chat = streamNames(s.space).chat;
    const ojsm = await on.jetstreamManager();
    for (
      const config of [
        (i: number) => ({ durable_name: `obs${i}`, ack_policy: AckPolicy.None }),
        (i: number) => ({
          name: `busy${i}`,
          ack_policy: AckPolicy.None,
          inactive_threshold: 60_000_000_000,
        }),
      ]
    ) {
      const { made, refusal } = await flood(ojsm, chat, config);
      assert.deepEqual(made, []);
      assert.match(refusal, /permissions violation/i);
    }
    assert.equal(await bobsHistory(s, bob, bn), "");
    // Its own one, named for it, it may make.
    const own = `hist_${credSubject(obsCreds)}`;
    await ojsm.consumers.add(chat, {
      name: own,
      filter_subject: `${subjectRoot(s.space)}.chat.>`,
      ack_policy: AckPolicy.None,
    });
    await ojsm.consumers.delete(chat, own);
  } finally {
    await on.close().catch(() => {});
    await bn.close().catch(() => {});
  }
});

Deno.test("redteam20b - stray consumers that never expire do not keep CHAT's cap from members past the janitor's sweep", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20bjan" });
  const daemon = startDaemonProcess(s);
  const bob = await s.agent("bob");
  const dn = await connectAs(s.url, s.deliveryCreds);
  const bn = await connectAs(s.url, bob.creds);
  try {
    await daemon.waitForLine(/delivery daemon up/, 40_000);
    const chat = streamNames(s.space).chat;
    const { made, refusal } = await flood(await dn.jetstreamManager(), chat, (i) => ({
      durable_name: `stray${i}`,
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.New,
    }));
    console.log(`made ${made.length} durable consumers on ${chat}; then: ${refusal}`);
    assert.notEqual(await bobsHistory(s, bob, bn), "", "the flood filled the cap");
    let err = "";
    await waitFor(async () => (err = await bobsHistory(s, bob, bn)) === "", {
      what: "bob's history consumer accepted after the janitor's sweep",
      timeoutMs: JANITOR_INTERVAL_MS + 30_000,
      intervalMs: 2_000,
    }).catch(() => {});
    assert.equal(err, "", `bob's history consumer was still refused: ${err}`);
    await waitFor(() => /consumer janitor: deleted \d+ consumers/.test(daemon.stderr()), {
      what: "the janitor's report in the daemon's log",
      timeoutMs: 30_000,
    });
  } finally {
    await dn.close().catch(() => {});
    await bn.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
