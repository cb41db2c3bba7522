/**
 * Red team 30, B1 and B2: the observer profile ("writes nothing") could pull from, acknowledge
 * and delete any consumer on CHAT, the delivery daemon's `fanout` durable included. Pulling and
 * terminating its posts took them from members who were offline, with no gap marker; one delete
 * stopped durable channel delivery for the whole space. The admin profile could do the same to
 * every member's `dm_` durable on DM. Each now reaches its own history consumer only,
 * `hist_<its key>`, and the broker refuses the rest.
 */
import assert from "node:assert/strict";
import { AckPolicy } from "nats";

import { createSpaceAuth, mintCreds, newIdentity, newLifecycleUid } from "../../lib/trust/mod.ts";
import { uniqueSpace } from "../_harness/broker.ts";
import { connectCreds, deniedBy, requestDenied, startAuthBroker } from "../trust/_helpers.ts";
import { names, provisionSpace } from "../trust/_space.ts";

const space = uniqueSpace("rt30hist");
const n = names(space);
const auth = await createSpaceAuth(space);
const bobUid = newLifecycleUid();

Deno.test("red team 30 - observer and admin reach only their own history consumer, never the daemon's or a member's durable", async () => {
  await using broker = await startAuthBroker(auth, [auth]);
  await provisionSpace(broker.url, auth, [{ owner: "local", actor: "bob", uid: bobUid }]);
  const delivery = await connectCreds(broker.url, await mintCreds(auth, newIdentity(), "delivery"));
  const obsId = newIdentity();
  const admId = newIdentity();
  const observer = await connectCreds(broker.url, await mintCreds(auth, obsId, "observer"));
  const admin = await connectCreds(broker.url, await mintCreds(auth, admId, "admin"));
  try {
    // The daemon's fan-out durable, as the delivery daemon makes it, with a post waiting.
    await (await delivery.jetstreamManager()).consumers.add(n.CHAT, {
      durable_name: "fanout",
      filter_subject: `${n.P}.chat.>`,
      ack_policy: AckPolicy.Explicit,
    });
    const op = await connectCreds(
      broker.url,
      await mintCreds(auth, newIdentity(), "operator", {
        principal: { owner: "local", actor: "op" },
      }),
    );
    await op.jetstream().publish(`${n.P}.chat.local.op.general`, "a post");
    await op.close();

    // The attack: pull the daemon's post, terminate it, delete the durable.
    const next = `$JS.API.CONSUMER.MSG.NEXT.${n.CHAT}.fanout`;
    assert.ok(await requestDenied(observer, next, JSON.stringify({ batch: 1, expires: 1e9 })));
    assert.ok(await requestDenied(observer, `$JS.API.CONSUMER.DELETE.${n.CHAT}.fanout`));
    assert.ok(await requestDenied(admin, `$JS.API.CONSUMER.DELETE.${n.CHAT}.fanout`));
    assert.ok(await requestDenied(observer, `$JS.API.CONSUMER.CREATE.${n.CHAT}`, "{}"));
    const ojsm = await observer.jetstreamManager();
    assert.ok(
      await deniedBy(ojsm.consumers.add(n.CHAT, { name: "peek", ack_policy: AckPolicy.None })),
    );
    // Admin and a member's DM durable: the same.
    const dm = `dm_local-bob-${bobUid}`;
    assert.ok(
      await requestDenied(admin, `$JS.API.CONSUMER.MSG.NEXT.${n.DM}.${dm}`, '{"batch":1}'),
    );
    assert.ok(await requestDenied(admin, `$JS.API.CONSUMER.DELETE.${n.DM}.${dm}`));
    const info = await (await delivery.jetstreamManager()).consumers.info(n.CHAT, "fanout");
    assert.equal(info.num_pending, 1, "the post still waits for the daemon");

    // What the profiles are for still works: history through their own consumer.
    const mine = `hist_${obsId.id}`;
    await ojsm.consumers.add(n.CHAT, {
      name: mine,
      filter_subject: `${n.P}.chat.>`,
      ack_policy: AckPolicy.None,
    });
    const m = await (await observer.jetstream().consumers.get(n.CHAT, mine)).next({
      expires: 5_000,
    });
    assert.equal(m?.string(), "a post");
    await ojsm.consumers.delete(n.CHAT, mine);
    const ajsm = await admin.jetstreamManager();
    const adminDm = `hist_${admId.id}`;
    await ajsm.consumers.add(n.DM, {
      name: adminDm,
      filter_subject: `${n.P}.inst.>`,
      ack_policy: AckPolicy.None,
    });
    // Red team 31: the one it may make takes one filter subject (6,000 held the stream's other
    // creates for seconds), and no other bucket gets a consumer of its making.
    assert.ok(
      await deniedBy(
        ajsm.consumers.add(n.DM, {
          name: adminDm,
          filter_subjects: Array.from({ length: 50 }, (_, i) => `${n.P}.inst.local.x${i}.>`),
          ack_policy: AckPolicy.None,
        }).then(() => ajsm.consumers.delete(n.DM, adminDm)),
      ),
    );
    assert.ok(
      await deniedBy(ojsm.consumers.add(`KV_${n.membership}`, {
        durable_name: "m0",
        ack_policy: AckPolicy.None,
      })),
    );
    assert.ok(
      await deniedBy(ojsm.consumers.add(`KV_${n.membership}`, {
        name: mine,
        filter_subject: `$KV.${n.membership}.>`,
        ack_policy: AckPolicy.None,
      })),
    );
    await ajsm.consumers.delete(n.DM, adminDm);
  } finally {
    for (const nc of [delivery, observer, admin]) await nc.close();
  }
});
