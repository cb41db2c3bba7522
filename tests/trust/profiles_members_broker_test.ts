/**
 * Member-facing profiles against a real operator-mode broker rendered by serverConfig: each
 * allowed action works and each forbidden one is refused by the broker itself.
 */
import assert from "node:assert/strict";
import { AckPolicy, headers } from "nats";
import { watchBucket } from "../../lib/endpoint/bucket_watch.ts";
import { uniqueSpace } from "../_harness/broker.ts";
import { createSpaceAuth, mintCreds, newIdentity, newLifecycleUid } from "../../lib/trust/mod.ts";
import {
  connectCreds,
  delivered,
  deniedBy,
  publishDenied,
  requestDenied,
  startAuthBroker,
  subscribeDenied,
  watchViolations,
} from "./_helpers.ts";
import { names, provisionSpace } from "./_space.ts";

const space = uniqueSpace("members");
const n = names(space);
const auth = await createSpaceAuth(space);
const aliceUid = newLifecycleUid();
const bobUid = newLifecycleUid();

async function agent(actor: string, uid: string, extra: Record<string, unknown> = {}) {
  return await mintCreds(auth, newIdentity(), "agent", {
    principal: { owner: "local", actor },
    lifecycleUid: uid,
    allowSubscribe: ["general"],
    allowPublish: ["general"],
    ...extra,
  });
}

Deno.test("trust - member profiles are enforced by the broker", async (t) => {
  await using broker = await startAuthBroker(auth, [auth]);
  await provisionSpace(broker.url, auth, [
    { owner: "local", actor: "alice", uid: aliceUid, role: "reviewer" },
    { owner: "local", actor: "bob", uid: bobUid },
  ]);
  const observer = await connectCreds(broker.url, await mintCreds(auth, newIdentity(), "observer"));
  const admin = await connectCreds(broker.url, await mintCreds(auth, newIdentity(), "admin"));
  const alice = await connectCreds(
    broker.url,
    await agent("alice", aliceUid, { role: "reviewer" }),
  );
  const bob = await connectCreds(broker.url, await agent("bob", bobUid));
  try {
    await t.step("agent: posts as itself to allowed channels only", async () => {
      const seen = watchViolations(alice);
      assert.ok(
        await delivered(alice, observer, `${n.P}.chat.>`, `${n.P}.chat.local.alice.general`),
      );
      assert.ok(await publishDenied(alice, seen, `${n.P}.chat.local.bob.general`), "forged sender");
      assert.ok(await publishDenied(alice, seen, `${n.P}.chat.local.alice.secret`), "no post ACL");
      assert.ok(await publishDenied(alice, seen, `${n.P}.inst.local.bob.local.mallory`));
    });

    await t.step("agent: reads allowed channels live, nothing else", async () => {
      const seen = watchViolations(bob);
      assert.ok(
        await delivered(alice, bob, `${n.P}.chat.*.*.general`, `${n.P}.chat.local.alice.general`),
      );
      assert.ok(await subscribeDenied(bob, seen, `${n.P}.chat.>`));
      assert.ok(await subscribeDenied(bob, seen, `${n.P}.chat.*.*.secret`));
      assert.ok(await subscribeDenied(bob, seen, `${n.P}.inst.local.alice.>`), "another's DMs");
      assert.ok(await subscribeDenied(bob, seen, "_INBOX.>"));
    });

    await t.step("agent: history only through its filter-pinned consumer", async () => {
      const jsm = await alice.jetstreamManager();
      const name = `chathist_local-alice-${aliceUid}`;
      await jsm.consumers.add(n.CHAT, {
        name,
        filter_subject: `${n.P}.chat.*.*.general`,
        ack_policy: AckPolicy.None,
      });
      const c = await alice.jetstream().consumers.get(n.CHAT, name);
      const m = await c.next({ expires: 2000 });
      assert.equal(m?.subject, `${n.P}.chat.local.alice.general`);
      await jsm.consumers.delete(n.CHAT, name);
      assert.ok(
        await deniedBy(jsm.consumers.add(n.CHAT, {
          name,
          filter_subject: `${n.P}.chat.*.*.secret`,
          ack_policy: AckPolicy.None,
        })),
        "a filter outside the read ACL",
      );
      assert.ok(
        await deniedBy(jsm.consumers.add(n.CHAT, {
          name: "chathist_local-bob-x",
          filter_subject: `${n.P}.chat.*.*.general`,
          ack_policy: AckPolicy.None,
        })),
        "another principal's durable name",
      );
    });

    await t.step(
      "agent: binds its DM durable but cannot create consumers on DM/TASK/DLV",
      async () => {
        await bob.publish(`${n.P}.inst.local.alice.local.bob`, "hi alice");
        await bob.flush();
        const dm = await alice.jetstream().consumers.get(n.DM, `dm_local-alice-${aliceUid}`);
        const m = await dm.next({ expires: 2000 });
        assert.equal(m?.string(), "hi alice");
        m!.ack();
        const jsm = await alice.jetstreamManager();
        for (const st of [n.DM, n.TASK, n.DLV]) {
          assert.ok(
            await deniedBy(jsm.consumers.add(st, { name: "peek", ack_policy: AckPolicy.None })),
            st,
          );
          assert.ok(await requestDenied(alice, `$JS.API.CONSUMER.CREATE.${st}`), st);
        }
        assert.ok(await requestDenied(alice, `$JS.API.STREAM.INFO.${n.DM}`), "DM metadata");
        assert.ok(
          await requestDenied(alice, `$JS.API.CONSUMER.INFO.${n.DM}.dm_local-bob-${bobUid}`),
          "another lifecycle's DM durable",
        );
        // The role queue: bind only.
        const q = await alice.jetstream().consumers.get(n.TASK, "svc_reviewer");
        assert.equal((await q.info()).name, "svc_reviewer");
      },
    );

    await t.step("agent: writes only its own presence key, reads everyone's", async () => {
      const kv = await alice.jetstream().views.kv(n.presence);
      assert.ok(await kv.put("local.alice", "{}") > 0);
      assert.ok(await deniedBy(kv.put("local.bob", "{}")));
      const bobKv = await bob.jetstream().views.kv(n.presence);
      assert.equal((await bobKv.get("local.alice"))?.string(), "{}");
      assert.ok(await requestDenied(alice, `$JS.API.STREAM.INFO.KV_${n.manager}`), "manager lease");
      // No consumer of its own on any bucket: a push consumer's deliver subject is unchecked
      // by the broker, so one would let it aim the bucket at any subscription.
      const jsm = await alice.jetstreamManager();
      for (const bucket of [n.presence, n.channels]) {
        assert.ok(
          await deniedBy(jsm.consumers.add(`KV_${bucket}`, {
            name: "aimed",
            deliver_subject: `${n.P}.inst.local.bob.local.alice`,
            ack_policy: AckPolicy.None,
          })),
          bucket,
        );
        assert.ok(await requestDenied(alice, `$JS.API.CONSUMER.CREATE.KV_${bucket}`), bucket);
      }
      // Its own key, rolled up over the whole bucket: refused by the bucket, row by row intact.
      const rollup = headers();
      rollup.set("Nats-Rollup", "all");
      await assert.rejects(
        alice.jetstream().publish(`$KV.${n.presence}.local.alice`, "{}", { headers: rollup }),
        /rollup/i,
      );
      assert.equal((await bobKv.get("local.alice"))?.string(), "{}");
      assert.ok(await requestDenied(alice, `$JS.API.STREAM.INFO.${n.INBOX}`), "INBOX");
    });

    await t.step("observer: sees every channel, no DMs, writes nothing", async () => {
      const seen = watchViolations(observer);
      assert.ok(await delivered(bob, observer, `${n.P}.chat.>`, `${n.P}.chat.local.bob.general`));
      assert.ok(await subscribeDenied(observer, seen, `${n.P}.inst.>`));
      assert.ok(await subscribeDenied(observer, seen, `${n.P}.svc.>`));
      assert.ok(await publishDenied(observer, seen, `${n.P}.chat.local.observer.general`));
      const kv = await observer.jetstream().views.kv(n.presence);
      assert.equal((await kv.get("local.alice"))?.string(), "{}");
      assert.ok(await deniedBy(kv.put("local.observer", "{}")));
      // The consumer-less watch works; a consumer-creating one (npm:nats's kv.watch) is refused.
      const rows: string[] = [];
      const w = await watchBucket(observer, n.presence, (e) => rows.push(e.key));
      w.stop();
      assert.deepEqual(rows, ["local.alice"]);
      assert.ok(!seen.some((v) => /CONSUMER|\$JS\.FC/.test(v.subject)), JSON.stringify(seen));
      assert.ok(await deniedBy(kv.watch().then((i) => i.stop())), "a push-consumer watch");
    });

    await t.step("admin: also sees DMs and anycast, still writes nothing", async () => {
      const seen = watchViolations(admin);
      assert.ok(await delivered(bob, admin, `${n.P}.inst.>`, `${n.P}.inst.local.alice.local.bob`));
      const jsm = await admin.jetstreamManager();
      assert.equal((await jsm.streams.info(n.DM)).config.name, n.DM);
      assert.ok(await publishDenied(admin, seen, `${n.P}.inst.local.alice.local.admin`));
      assert.ok(await subscribeDenied(admin, seen, `${n.P}.ep.>`));
      assert.ok(await requestDenied(admin, `$JS.API.STREAM.PURGE.${n.CHAT}`));
    });

    await t.step("operator: posts as itself anywhere, reads only its own DMs", async () => {
      const op = await connectCreds(
        broker.url,
        await mintCreds(auth, newIdentity(), "operator", {
          principal: { owner: "local", actor: "op" },
        }),
      );
      try {
        const seen = watchViolations(op);
        assert.ok(await delivered(op, observer, `${n.P}.chat.>`, `${n.P}.chat.local.op.any.thing`));
        assert.ok(
          await delivered(
            alice,
            op,
            `${n.P}.inst.local.op.*.*`,
            `${n.P}.inst.local.op.local.alice`,
          ),
        );
        assert.ok(await publishDenied(op, seen, `${n.P}.chat.local.alice.general`));
        assert.ok(await subscribeDenied(op, seen, `${n.P}.chat.>`));
      } finally {
        await op.close();
      }
    });

    await t.step("probe: connects, and may publish nothing", async () => {
      const probe = await connectCreds(broker.url, await mintCreds(auth, newIdentity(), "probe"));
      try {
        const seen = watchViolations(probe);
        await probe.flush();
        assert.ok(await publishDenied(probe, seen, "$JS.API.INFO"));
        assert.ok(await publishDenied(probe, seen, `${n.P}.chat.local.probe.general`));
        assert.ok(await subscribeDenied(probe, seen, `${n.P}.chat.>`));
      } finally {
        await probe.close();
      }
    });
  } finally {
    for (const nc of [observer, admin, alice, bob]) await nc.close();
  }
});
