/**
 * Red team 32, minted creds: the relay's guard (no deliver_subject on a consumer create) stands
 * only between a sandboxed agent and the broker. A member holding a `cotal mint` cred (observer,
 * admin, agent) talks to the broker directly, and the broker does not check a push consumer's
 * deliver subject. Each of these profiles may create one history consumer; the attempt aims it
 * at another stream's subjects (DM, TASK, CHAT) so that the space account's own delivery writes
 * what the "writes nothing" profile may not, fills those streams with redeliveries, or leaks
 * DMs into a channel.
 *
 * Passes when the defence holds: every aimed create is refused, or nothing lands in the target
 * stream.
 */
import assert from "node:assert/strict";
import { AckPolicy } from "nats";

import { createSpaceAuth, mintCreds, newIdentity, newLifecycleUid } from "../../lib/trust/mod.ts";
import { uniqueSpace } from "../_harness/broker.ts";
import { connectCreds, startAuthBroker } from "../trust/_helpers.ts";
import { names, provisionSpace } from "../trust/_space.ts";

const space = uniqueSpace("rt32dlv");
const n = names(space);
const auth = await createSpaceAuth(space);
const bobUid = newLifecycleUid();

async function msgs(nc: Awaited<ReturnType<typeof connectCreds>>, stream: string) {
  const si = await (await nc.jetstreamManager()).streams.info(stream);
  return { msgs: si.state.messages, bytes: si.state.bytes };
}

Deno.test("red team 32 - a minted observer or admin cannot aim its history consumer into DM, TASK or CHAT", async () => {
  await using broker = await startAuthBroker(auth, [auth]);
  await provisionSpace(broker.url, auth, [{
    owner: "local",
    actor: "bob",
    uid: bobUid,
    role: "upper",
  }]);
  const prov = await connectCreds(broker.url, await mintCreds(auth, newIdentity(), "provisioner"));
  const obsId = newIdentity();
  const admId = newIdentity();
  const observer = await connectCreds(broker.url, await mintCreds(auth, obsId, "observer"));
  const admin = await connectCreds(broker.url, await mintCreds(auth, admId, "admin"));
  const op = await connectCreds(
    broker.url,
    await mintCreds(auth, newIdentity(), "operator", {
      principal: { owner: "local", actor: "carol" },
    }),
  );
  const results: Record<string, string> = {};
  try {
    await op.jetstream().publish(`${n.P}.chat.local.carol.general`, "a channel post");
    await op.jetstream().publish(`${n.P}.inst.local.bob.local.carol`, "a private DM to bob");
    const before = {
      dm: await msgs(prov, n.DM),
      task: await msgs(prov, n.TASK),
      chat: await msgs(prov, n.CHAT),
    };
    const ojsm = await observer.jetstreamManager();
    const ajsm = await admin.jetstreamManager();
    const obsName = `hist_${obsId.id}`;
    const admName = `hist_${admId.id}`;
    const tries: [string, () => Promise<unknown>][] = [
      ["observer CHAT->DM", () =>
        ojsm.consumers.add(n.CHAT, {
          name: obsName,
          filter_subject: `${n.P}.chat.>`,
          deliver_subject: `${n.P}.inst.local.bob.local.carol`,
          ack_policy: AckPolicy.Explicit,
          ack_wait: 1_000_000_000,
        })],
      [
        "observer CHAT->TASK",
        () =>
          ojsm.consumers.delete(n.CHAT, obsName).catch(() => {}).then(() =>
            ojsm.consumers.add(n.CHAT, {
              name: obsName,
              filter_subject: `${n.P}.chat.>`,
              deliver_subject: `${n.P}.svc.upper.local.carol`,
              ack_policy: AckPolicy.None,
            })
          ),
      ],
      ["admin DM->CHAT", () =>
        ajsm.consumers.add(n.DM, {
          name: admName,
          filter_subject: `${n.P}.inst.>`,
          deliver_subject: `${n.P}.chat.local.carol.general`,
          ack_policy: AckPolicy.None,
        })],
    ];
    for (const [what, f] of tries) {
      try {
        await f();
        results[what] = "created";
      } catch (e) {
        results[what] = `refused: ${(e as Error).message}`;
      }
      await new Promise((r) => setTimeout(r, 2500));
    }
    const after = {
      dm: await msgs(prov, n.DM),
      task: await msgs(prov, n.TASK),
      chat: await msgs(prov, n.CHAT),
    };
    console.log(JSON.stringify({ results, before, after }, null, 1));
    assert.deepEqual(after.dm.msgs, before.dm.msgs, "nothing the observer aimed lands in DM");
    assert.deepEqual(after.task.msgs, before.task.msgs, "nothing the observer aimed lands in TASK");
    assert.deepEqual(after.chat.msgs, before.chat.msgs, "no DM is replayed into a channel");
  } finally {
    for (const nc of [prov, observer, admin, op]) await nc.close();
  }
});

Deno.test("red team 32 - a minted observer's history consumer cannot turn the channel history into a redelivery flood at every presence watcher", async () => {
  const space2 = uniqueSpace("rt32amp");
  const n2 = names(space2);
  const auth2 = await createSpaceAuth(space2);
  await using broker = await startAuthBroker(auth2, [auth2]);
  const aliceUid = newLifecycleUid();
  await provisionSpace(broker.url, auth2, [{ owner: "local", actor: "alice", uid: aliceUid }]);
  const obsId = newIdentity();
  const observer = await connectCreds(broker.url, await mintCreds(auth2, obsId, "observer"));
  const alice = await connectCreds(
    broker.url,
    await mintCreds(auth2, newIdentity(), "agent", {
      principal: { owner: "local", actor: "alice" },
      lifecycleUid: aliceUid,
      allowPublish: ["general"],
      allowSubscribe: ["general"],
    }),
  );
  // Fair share: 40 posts of 16 KiB, 640 KiB of channel history (any member's ordinary posts).
  const op = await connectCreds(
    broker.url,
    await mintCreds(auth2, newIdentity(), "operator", {
      principal: { owner: "local", actor: "carol" },
    }),
  );
  let received = 0;
  let receivedMsgs = 0;
  try {
    const body = "x".repeat(16 * 1024);
    for (let i = 0; i < 40; i++) {
      await op.jetstream().publish(`${n2.P}.chat.local.carol.general`, body);
    }
    // The victim: a presence watch, as every member's endpoint holds one.
    const sub = alice.subscribe(`$KV.${n2.presence}.>`, {
      callback: (_e, m) => {
        received += m.data.length;
        receivedMsgs++;
      },
    });
    await alice.flush();
    let created = "created";
    try {
      await (await observer.jetstreamManager()).consumers.add(n2.CHAT, {
        name: `hist_${obsId.id}`,
        filter_subject: `${n2.P}.chat.>`,
        deliver_subject: `$KV.${n2.presence}.local.ghost`,
        ack_policy: AckPolicy.Explicit,
        ack_wait: 20_000_000, // 20 ms: nobody acks, so everything comes again 50 times a second
        max_ack_pending: 10_000,
        max_deliver: -1,
      });
    } catch (e) {
      created = `refused: ${(e as Error).message}`;
    }
    await new Promise((r) => setTimeout(r, 5_000));
    sub.unsubscribe();
    console.log(
      `observer's aimed consumer: ${created}; one presence watcher got ${receivedMsgs} messages, ${
        (received / 1048576).toFixed(1)
      } MiB in 5 s (channel history 0.6 MiB)`,
    );
    assert.ok(
      received < 1024 * 1024,
      `a presence watcher took ${(received / 1048576).toFixed(1)} MiB of redeliveries in 5 s`,
    );
  } finally {
    for (const nc of [observer, alice, op]) await nc.close();
  }
});

Deno.test("red team 32 - a minted observer's history consumer aimed at the delivery daemon's liveness plane (no stream captures it) delivers nothing there", async () => {
  const space3 = uniqueSpace("rt32live");
  const n3 = names(space3);
  const auth3 = await createSpaceAuth(space3);
  await using broker = await startAuthBroker(auth3, [auth3]);
  await provisionSpace(broker.url, auth3, []);
  const obsId = newIdentity();
  const observer = await connectCreds(broker.url, await mintCreds(auth3, obsId, "observer"));
  const dlv = await connectCreds(broker.url, await mintCreds(auth3, newIdentity(), "delivery"));
  const op = await connectCreds(
    broker.url,
    await mintCreds(auth3, newIdentity(), "operator", {
      principal: { owner: "local", actor: "carol" },
    }),
  );
  let got = 0;
  let bytes = 0;
  try {
    for (let i = 0; i < 20; i++) {
      await op.jetstream().publish(`${n3.P}.chat.local.carol.general`, "x".repeat(32768));
    }
    // What the delivery daemon subscribes to for liveness probes (lib/delivery/service.ts).
    const sub = dlv.subscribe(`${n3.P}.live.delivery.*.*`, {
      callback: (_e, m) => {
        got++;
        bytes += m.data.length;
      },
    });
    await dlv.flush();
    const jsm = await observer.jetstreamManager();
    const made = await jsm.consumers.add(n3.CHAT, {
      name: `hist_${obsId.id}`,
      filter_subject: `${n3.P}.chat.>`,
      deliver_subject: `${n3.P}.live.delivery.local.ghost`,
      ack_policy: AckPolicy.Explicit,
      ack_wait: 5_000_000,
      max_deliver: -1,
    }).then(() => "created", (e) => `refused: ${(e as Error).message}`);
    await new Promise((r) => setTimeout(r, 3_000));
    sub.unsubscribe();
    console.log(
      `aimed consumer ${made}; the daemon's liveness subscription got ${got} messages, ${bytes} bytes`,
    );
    assert.equal(got, 0);
  } finally {
    for (const nc of [observer, dlv, op]) await nc.close();
  }
});
