/**
 * Host-side profiles against a real operator-mode broker rendered by serverConfig: each
 * allowed action works and each forbidden one is refused by the broker itself.
 */
import assert from "node:assert/strict";
import { AckPolicy } from "nats";
import { uniqueSpace } from "../_harness/broker.ts";
import {
  composeSpaceAuth,
  createBrokerAuth,
  createSpaceAccountAuth,
  mintCreds,
  newIdentity,
  newLifecycleUid,
  type SpaceAuth,
} from "../../lib/trust/mod.ts";
import {
  connectCreds,
  delivered,
  deniedBy,
  publishDenied,
  requestDenied,
  requestJson,
  startAuthBroker,
  subscribeDenied,
  watchViolations,
} from "./_helpers.ts";
import { names, provisionSpace } from "./_space.ts";

const broker = await createBrokerAuth("infra");
const auth = composeSpaceAuth(broker, await createSpaceAccountAuth(broker, uniqueSpace("infra")));
const doomed = composeSpaceAuth(
  broker,
  await createSpaceAccountAuth(broker, uniqueSpace("doomed")),
);
const n = names(auth.space);
const uid = newLifecycleUid();
const otherUid = newLifecycleUid();

async function as(url: string, a: SpaceAuth, profile: Parameters<typeof mintCreds>[2], opts = {}) {
  return await connectCreds(url, await mintCreds(a, newIdentity(), profile, opts));
}

Deno.test("trust - host profiles are enforced by the broker", async (t) => {
  await using b = await startAuthBroker(broker, [auth, doomed]);
  await provisionSpace(b.url, auth, [
    { owner: "local", actor: "alice", uid },
    { owner: "local", actor: "alice", uid: otherUid },
  ]);
  await provisionSpace(b.url, doomed);
  const admin = await as(b.url, auth, "admin");
  try {
    await t.step("provisioner: creates, but cannot read bodies, delete or purge", async () => {
      const nc = await as(b.url, auth, "provisioner");
      try {
        const jsm = await nc.jetstreamManager();
        // Idempotent re-create of an existing stream is answered (allowed).
        assert.equal((await jsm.streams.info(n.DM)).config.name, n.DM);
        for (const verb of ["STREAM.DELETE", "STREAM.PURGE"]) {
          assert.ok(await requestDenied(nc, `$JS.API.${verb}.${n.CHAT}`), verb);
        }
        assert.ok(
          await requestDenied(nc, `$JS.API.CONSUMER.MSG.NEXT.${n.DM}.dm_local-alice-${uid}`),
          "reading DM bodies",
        );
        // It may update a stream (setup brings an older space's caps in line), never delete or
        // purge one (above).
        assert.ok(!(await requestDenied(nc, `$JS.API.STREAM.UPDATE.${n.CHAT}`)));
        const seen = watchViolations(nc);
        assert.ok(await publishDenied(nc, seen, `${n.P}.chat.local.alice.general`));
      } finally {
        await nc.close();
      }
    });

    await t.step("deprovisioner: deletes exactly its target's durables and ACL row", async () => {
      const kvNc = await as(b.url, auth, "provisioner");
      const aclKey = `local.alice.${uid}`;
      await (await kvNc.jetstream().views.kv(n.acl)).put(aclKey, "{}");
      await kvNc.close();
      const nc = await as(b.url, auth, "deprovisioner", {
        deprovisionTarget: { owner: "local", actor: "alice", lifecycleUid: uid },
      });
      try {
        const jsm = await nc.jetstreamManager();
        assert.equal(await jsm.consumers.delete(n.DM, `dm_local-alice-${uid}`), true);
        assert.equal(await jsm.consumers.delete(n.DLV, `dlv_local-alice-${uid}`), true);
        assert.ok(
          await deniedBy(jsm.consumers.delete(n.DM, `dm_local-alice-${otherUid}`)),
          "another lifecycle of the same alias",
        );
        const acl = await nc.jetstream().views.kv(n.acl);
        await acl.delete(aclKey);
        assert.ok(await deniedBy(acl.put(`local.alice.${otherUid}`, "{}")));
      } finally {
        await nc.close();
      }
    });

    await t.step(
      "delivery: fan-out reads CHAT, writes DLV, serves ctl; never posts chat",
      async () => {
        const nc = await as(b.url, auth, "delivery");
        try {
          const seen = watchViolations(nc);
          const js = nc.jetstream();
          await js.publish(`${n.P}.dlv.local.alice.${otherUid}`, "copy");
          await js.publish(`${n.P}.dinbox.local.alice.${otherUid}`, "pre");
          const jsm = await nc.jetstreamManager();
          await jsm.consumers.add(n.INBOX, {
            durable_name: "reader",
            ack_policy: AckPolicy.Explicit,
          });
          const reader = await js.consumers.get(n.INBOX, "reader");
          assert.equal((await reader.next({ expires: 2000 }))?.string(), "pre");
          await jsm.consumers.add(n.CHAT, {
            durable_name: "fanout",
            ack_policy: AckPolicy.Explicit,
          });
          assert.equal((await jsm.consumers.info(n.CHAT, "fanout")).name, "fanout");
          assert.ok(
            await deniedBy(
              jsm.consumers.add(n.INBOX, { durable_name: "peek", ack_policy: AckPolicy.None }),
            ),
            "a second INBOX reader",
          );
          const agent = await as(b.url, auth, "agent", {
            principal: { owner: "local", actor: "alice" },
            lifecycleUid: otherUid,
          });
          assert.ok(
            await delivered(
              agent,
              nc,
              `${n.P}.ctl.delivery.*.*`,
              `${n.P}.ctl.delivery.local.alice`,
            ),
          );
          await agent.close();
          // The storage warden's scan: its one consumer name on DM, nothing else of DM's.
          await jsm.consumers.add(n.DM, {
            name: "warden",
            filter_subject: `${n.P}.inst.>`,
            ack_policy: AckPolicy.None,
            headers_only: true,
            mem_storage: true,
          });
          assert.equal((await jsm.consumers.info(n.DM, "warden")).name, "warden");
          assert.equal(await jsm.consumers.delete(n.DM, "warden"), true);
          assert.ok(
            await deniedBy(jsm.consumers.add(n.DM, {
              name: "peek",
              filter_subject: `${n.P}.inst.>`,
              ack_policy: AckPolicy.None,
            })),
            "a DM consumer of another name",
          );
          assert.ok(
            await requestDenied(
              nc,
              `$JS.API.CONSUMER.MSG.NEXT.${n.DM}.dm_local-alice-${otherUid}`,
            ),
            "reading a member's DM durable",
          );
          assert.ok(
            await deniedBy(jsm.consumers.delete(n.DM, `dm_local-alice-${otherUid}`)),
            "deleting a member's DM durable",
          );
          assert.ok(await publishDenied(nc, seen, `${n.P}.chat.local.alice.general`));
          assert.ok(await publishDenied(nc, seen, `${n.P}.inst.local.alice.local.bob`));
          assert.ok(await subscribeDenied(nc, seen, `${n.P}.inst.>`));
          const lease = await js.views.kv(n.delivery);
          assert.ok(await lease.put("lease.0", "{}") > 0);
          assert.ok(await deniedBy(lease.put("other", "{}")));
        } finally {
          await nc.close();
        }
      },
    );

    await t.step("supervisor: its lease and renewal keys, the delivery-admin rail", async () => {
      const nc = await as(b.url, auth, "supervisor", {
        principal: { owner: "local", actor: "mgr" },
      });
      try {
        const seen = watchViolations(nc);
        const mgr = await nc.jetstream().views.kv(n.manager);
        assert.ok(await mgr.put("lease.i1", "{}") > 0);
        assert.ok(await mgr.put("renewal", "{}") > 0);
        assert.ok(await deniedBy(mgr.put("other", "{}")));
        const dlv = await as(b.url, auth, "delivery");
        assert.ok(
          await delivered(
            nc,
            dlv,
            `${n.P}.ctl.delivery-admin.*.*`,
            `${n.P}.ctl.delivery-admin.local.mgr`,
          ),
        );
        await dlv.close();
        assert.ok(await publishDenied(nc, seen, `${n.P}.ctl.delivery-admin.local.alice`));
        assert.ok(await subscribeDenied(nc, seen, `${n.P}.chat.>`));
        assert.ok(await requestDenied(nc, `$JS.API.STREAM.INFO.${n.DM}`));
      } finally {
        await nc.close();
      }
    });

    await t.step("membership-rw: writes the membership feed, only reads members", async () => {
      const nc = await as(b.url, auth, "membership-rw");
      try {
        const js = nc.jetstream();
        assert.ok(await (await js.views.kv(n.membership)).put("local.alice", "{}") > 0);
        const members = await js.views.kv(n.members);
        assert.equal(await members.get("nope"), null);
        assert.ok(await deniedBy(members.put("general/local.alice.x", "{}")));
        assert.ok(await requestDenied(nc, `$JS.API.STREAM.INFO.KV_${n.acl}`));
      } finally {
        await nc.close();
      }
    });

    await t.step("channel-writer: writes the channel registry only", async () => {
      const nc = await as(b.url, auth, "channel-writer");
      try {
        const js = nc.jetstream();
        assert.ok(await (await js.views.kv(n.channels)).put("general", "{}") > 0);
        assert.ok(await requestDenied(nc, `$JS.API.STREAM.INFO.KV_${n.acl}`));
        const seen = watchViolations(nc);
        assert.ok(await publishDenied(nc, seen, `$KV.${n.acl}.local.alice.x`));
      } finally {
        await nc.close();
      }
    });

    await t.step("purger: purges CHAT and DM, reads nothing", async () => {
      const nc = await as(b.url, auth, "purger");
      try {
        const r = await requestJson(nc, `$JS.API.STREAM.PURGE.${n.CHAT}`, {});
        assert.equal(r.success, true);
        assert.ok(await requestDenied(nc, `$JS.API.STREAM.INFO.${n.CHAT}`));
        assert.ok(await requestDenied(nc, `$JS.API.STREAM.PURGE.${n.TASK}`));
        assert.ok(await requestDenied(nc, `$JS.API.STREAM.DELETE.${n.CHAT}`));
      } finally {
        await nc.close();
      }
    });

    await t.step("teardown: deletes its own space's streams, reads no bodies", async () => {
      const d = names(doomed.space);
      const nc = await as(b.url, doomed, "teardown");
      try {
        const jsm = await nc.jetstreamManager();
        for (const st of [d.CHAT, d.DM, d.TASK, d.INBOX, d.DLV, `KV_${d.presence}`]) {
          assert.equal(await jsm.streams.delete(st), true, st);
        }
        assert.ok(await requestDenied(nc, `$JS.API.CONSUMER.CREATE.KV_${d.acl}`));
        assert.ok(await requestDenied(nc, `$JS.API.STREAM.MSG.GET.KV_${d.acl}`));
        const seen = watchViolations(nc);
        assert.ok(await publishDenied(nc, seen, `${d.P}.chat.local.x.general`));
        // The sibling space is untouched.
        assert.equal(
          (await (await admin.jetstreamManager()).streams.info(n.CHAT)).config.name,
          n.CHAT,
        );
      } finally {
        await nc.close();
      }
    });
  } finally {
    await admin.close();
  }
});
