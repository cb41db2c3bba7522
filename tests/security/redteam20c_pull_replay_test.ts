/**
 * Red team 20c: replay another member's genuine message through a pull delivery aimed at a
 * stream subject. The broker never checks a request's reply subject, and a pull's answer is not
 * JSON or a status: it is the stored message itself, with the headers its author sent (no
 * `Nats-Stream`/`Nats-Sequence` marks, which ride the `$JS.ACK` reply subject instead). A member
 * holding its own agent cred (an embedder's agent, `cotal mint --provision`) pulls its own
 * consumer with the reply set to a DM subject `inst.<bob>.<alice>` (or another channel's
 * `chat.<alice>.<ch>`, or a role's `svc.<role>.<alice>`): the broker publishes alice's real
 * post there, the stream stores it, and bob's endpoint decodes a DM that alice never sent to
 * him: `from` is alice, the subject's sender is alice, no broker-answer mark. The storage warden
 * counts it genuine too. Each test asserts the defence holds: bob's DM durable yields no message
 * from alice that decodes, and no replay lands where alice never posted.
 * Result when written: held on 2.10.27 and 2.15.1. The broker routes a pull's delivery to the
 * subscribers of the reply subject but no stream stores it (DM stayed at 0 messages, ops at 0),
 * and a live subscriber sees it under its stored subject (`chat.<alice>.general`) with a
 * `$JS.ACK` reply, which receivers drop.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { waitFor } from "../_harness/broker.ts";
import { headersOf } from "../../lib/nats/headers.ts";
import {
  chathistDurableName,
  decodeMessage,
  dmDurableName,
  streamNames,
} from "../../lib/wire/mod.ts";
import { subjectRoot } from "../../lib/wire/subjects.ts";
import { connectAs, post, startDaemonProcess, startDeliverySpace } from "../delivery/_helpers.ts";

const TE = new TextEncoder();
const NANOS = 1_000_000;

async function openHistory(
  nc: NatsConnection,
  chat: string,
  name: string,
  filter: string,
): Promise<void> {
  const body = {
    stream_name: chat,
    config: {
      name,
      filter_subject: filter,
      ack_policy: "explicit",
      deliver_policy: "all",
      inactive_threshold: 60_000 * NANOS,
    },
  };
  const r = await nc.request(
    `$JS.API.CONSUMER.CREATE.${chat}.${name}.${filter}`,
    TE.encode(JSON.stringify(body)),
    { timeout: 5000 },
  );
  const reply = JSON.parse(new TextDecoder().decode(r.data));
  assert.equal(reply.error, undefined, JSON.stringify(reply.error));
}

Deno.test("redteam20c - a pull aimed at a DM subject does not deliver another member's post to bob as her DM", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20crepl" });
  const daemon = startDaemonProcess(s);
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mallory = await s.agent("mallory");
  const P = subjectRoot(s.space);
  const { chat, dm } = streamNames(s.space);
  const a = await connectAs(s.url, alice.creds);
  const b = await connectAs(s.url, bob.creds);
  const m = await connectAs(s.url, mallory.creds);
  try {
    await daemon.waitForLine(/membership feed up/, 40_000);
    const said = await post(a, s.space, alice, "general", "lunch is at noon, everyone");
    // Mallory's one history consumer on CHAT, as her grant allows.
    const hist = chathistDurableName(mallory.principal, mallory.uid);
    await openHistory(m, chat, hist, `${P}.chat.*.*.general`);
    // One pull, its answer aimed at alice -> bob's DM subject.
    m.publish(
      `$JS.API.CONSUMER.MSG.NEXT.${chat}.${hist}`,
      TE.encode(JSON.stringify({ batch: 1 })),
      {
        reply: `${P}.inst.local.bob.local.alice`,
      },
    );
    await m.flush();
    // Bob reads his DMs as his endpoint does (bind his dm_ durable, decode each).
    const c = await b.jetstream().consumers.get(dm, dmDurableName(bob.principal, bob.uid));
    const forged: string[] = [];
    const deadline = Date.now() + 8_000;
    while (Date.now() < deadline && forged.length === 0) {
      const batch = await c.fetch({ max_messages: 10, expires: 1000 });
      for await (const msg of batch) {
        const d = decodeMessage(msg.subject, msg.data, {
          space: s.space,
          self: bob.principal,
          headers: headersOf(msg),
        });
        if (d.ok) {
          forged.push(
            `${d.kind} from ${d.sender.actor}: ${
              JSON.stringify(d.message.parts)
            } (id ${d.message.id}, alice's post ${said.id})`,
          );
        }
        msg.ack();
      }
    }
    console.log(forged.join("\n"));
    assert.deepEqual(forged, [], "bob was handed alice's channel post as her DM to him");
  } finally {
    await Promise.all([a, b, m].map((c) => c.close().catch(() => {})));
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("redteam20c - a pull aimed at another channel's subject does not post alice's words where she never posted", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20crepc" });
  const alice = await s.agent("alice", { allowSubscribe: ["general", "ops"] });
  const mallory = await s.agent("mallory", { allowSubscribe: ["general"] });
  const P = subjectRoot(s.space);
  const { chat } = streamNames(s.space);
  const a = await connectAs(s.url, alice.creds);
  const m = await connectAs(s.url, mallory.creds);
  try {
    await post(a, s.space, alice, "general", "ship it");
    const hist = chathistDurableName(mallory.principal, mallory.uid);
    await openHistory(m, chat, hist, `${P}.chat.*.*.general`);
    m.publish(
      `$JS.API.CONSUMER.MSG.NEXT.${chat}.${hist}`,
      TE.encode(JSON.stringify({ batch: 1 })),
      {
        reply: `${P}.chat.local.alice.ops`,
      },
    );
    await m.flush();
    const jsm = await a.jetstreamManager();
    let stored = 0;
    await waitFor(async () => {
      const info = await jsm.streams.info(chat, { subjects_filter: `${P}.chat.local.alice.ops` });
      stored = Object.values(info.state.subjects ?? {}).reduce((x, y) => x + y, 0);
      return stored > 0;
    }, { what: "a replay in ops", timeoutMs: 3_000 }).catch(() => {});
    assert.equal(stored, 0, "alice's post from general was stored in ops under her name");
  } finally {
    await Promise.all([a, m].map((c) => c.close().catch(() => {})));
  }
});
