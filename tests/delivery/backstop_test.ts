/**
 * The durable backstop end to end: the daemon runs as a real process under its own permission
 * row (it may read only its space's store directory; the signer is denied), agents are real
 * CotalEndpoints or raw connections holding agent creds.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { waitFor } from "../_harness/broker.ts";
import { CotalEndpoint, type CotalMessageEvent } from "../../lib/endpoint/mod.ts";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { denoRunFlags } from "../../lib/permissions.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { bindKv, reissueAclRow, seedChannelRegistry } from "../../lib/wire/mod.ts";
import { bucketNames } from "../../lib/wire/resources.ts";
import { spaceKeyHex } from "../../lib/workspace/mod.ts";
import {
  type Agent,
  connectAs,
  dlvCount,
  drainDlv,
  post,
  startDaemonProcess,
  startDeliverySpace,
  waitSettled,
} from "./_helpers.ts";

Deno.test("delivery - the backstop as a real process: offline catch-up, leave, ACL narrowing, feed, eviction", async (t) => {
  await using s = await startDeliverySpace();
  // No replay on join: the durable path is the only catch-up an offline member gets.
  await seedChannelRegistry({
    servers: s.url,
    space: s.space,
    creds: await s.mint("channel-writer"),
    channels: { general: { deliveryClass: "durable", replay: false } },
  });
  const flags = denoRunFlags("cotal-delivery", {
    root: s.root,
    broker: [new URL(s.url).host],
    spaceKey: `space.${spaceKeyHex(s.space)}`,
  });
  // The signer is in the same store, and the daemon's row denies it.
  assert.ok((await Deno.stat(`${s.root}/secrets/auth/broker.json`)).isFile);
  assert.ok(flags.includes(`--deny-read=${s.root}/secrets/auth`));
  const key = `space.${spaceKeyHex(s.space)}`;
  assert.ok(
    flags.includes(`--allow-read=${s.root}/secrets/${key},${s.root}/run/delivery/${key}.lock`),
  );

  const daemon = startDaemonProcess(s);
  const endpoints: CotalEndpoint[] = [];
  const conns: NatsConnection[] = [];
  try {
    await daemon.waitForLine(/delivery daemon up/);
    const alice = await s.agent("alice");
    const bob = await s.agent("bob");
    const an = await connectAs(s.url, alice.creds);
    conns.push(an);
    const endpoint = (a: Agent) => {
      const ep = new CotalEndpoint({
        servers: s.url,
        space: s.space,
        card: { name: a.name },
        lifecycleUid: a.uid,
        creds: a.creds,
        channels: ["general"],
      });
      endpoints.push(ep);
      return ep;
    };

    await t.step(
      "an offline member gets everything sent while away, once after dedupe",
      async () => {
        const b1 = endpoint(bob);
        const got1: CotalMessageEvent[] = [];
        b1.addEventListener("message", (e) => void got1.push(e as CotalMessageEvent));
        await b1.start();
        const bn = await connectAs(s.url, bob.creds);
        conns.push(bn);
        await waitFor(async () => {
          const r = await deliveryRequest(bn, s.space, bob.principal, "listMemberships", {});
          const list = r.memberships as { channel: string; activated: boolean }[];
          return list.some((m) => m.channel === "general" && m.activated);
        }, { what: "bob's durable membership of general" });

        const online = [];
        for (let i = 0; i < 10; i++) {
          online.push((await post(an, s.space, alice, "general", `on ${i}`)).id);
        }
        // Live and durable copies of each message arrive; the endpoint surfaces each id once.
        await waitFor(() => got1.length >= 10, { what: "bob to see the 10 online messages" });
        await waitSettled(s);
        await waitFor(async () => await dlvCount(bn, s.space, bob) === 0, {
          what: "bob's durable copies to be settled",
        });
        assert.deepEqual(got1.map((e) => e.message.id).sort(), [...online].sort());
        await b1.stop();

        const away = [];
        for (let i = 0; i < 20; i++) {
          away.push((await post(an, s.space, alice, "general", `away ${i}`)).id);
        }
        await waitFor(async () => await dlvCount(bn, s.space, bob) >= 20, {
          what: "the 20 away copies to reach bob's DLV",
        });
        const b2 = endpoint(bob);
        const got2: CotalMessageEvent[] = [];
        b2.addEventListener("message", (e) => void got2.push(e as CotalMessageEvent));
        await b2.start();
        await waitFor(() => got2.length >= 20, { what: "bob to catch up on return" });
        await new Promise((r) => setTimeout(r, 300));
        assert.deepEqual(got2.map((e) => e.message.id).sort(), [...away].sort());
        assert.ok(got2.every((e) => e.meta.source === "durable" && e.meta.kind === "channel"));
        assert.ok(got2.every((e) => e.message.channel === "general"));
      },
    );

    await t.step("a member that left gets nothing sent after its leave", async () => {
      const carol = await s.agent("carol");
      const cn = await connectAs(s.url, carol.creds);
      conns.push(cn);
      const join = await deliveryRequest(cn, s.space, carol.principal, "durableJoin", {
        channel: "general",
      });
      assert.equal(join.durable, true);
      const before = [];
      for (let i = 0; i < 3; i++) {
        before.push((await post(an, s.space, alice, "general", `b ${i}`)).id);
      }
      await waitFor(async () => await dlvCount(cn, s.space, carol) >= 3, {
        what: "carol's 3 copies",
      });
      const left = await deliveryRequest(cn, s.space, carol.principal, "durableLeave", {
        channel: "general",
        generation: join.generation,
        lifecycleUid: carol.uid,
      });
      assert.equal(left.left, true);
      const after = [];
      for (let i = 0; i < 3; i++) {
        after.push((await post(an, s.space, alice, "general", `a ${i}`)).id);
      }
      await waitSettled(s);
      const dlv = await drainDlv(cn, s.space, carol);
      assert.deepEqual(dlv.messages.map((m) => m.id).sort(), [...before].sort());
      // A second leave of the same row is an idempotent no-op; a stale generation is refused.
      const again = await deliveryRequest(cn, s.space, carol.principal, "durableLeave", {
        channel: "general",
        generation: join.generation,
        lifecycleUid: carol.uid,
      });
      assert.equal(again.alreadyLeft, true);
    });

    await t.step("narrowing a member's ACL stops new entries", async () => {
      const dave = await s.agent("dave", { allowSubscribe: ["general", "ops"] });
      const dn = await connectAs(s.url, dave.creds);
      conns.push(dn);
      await deliveryRequest(dn, s.space, dave.principal, "durableJoin", { channel: "general" });
      const first = [];
      for (let i = 0; i < 2; i++) {
        first.push((await post(an, s.space, alice, "general", `d ${i}`)).id);
      }
      await waitFor(async () => await dlvCount(dn, s.space, dave) >= 2, {
        what: "dave's 2 copies",
      });
      const pn = await connectAs(s.url, await s.mint("provisioner"));
      conns.push(pn);
      await reissueAclRow(
        await bindKv(pn, bucketNames(s.space).acl),
        bucketNames(s.space).acl,
        dave.principal,
        dave.uid,
        ["ops"],
      );
      const later = [];
      for (let i = 0; i < 3; i++) {
        later.push((await post(an, s.space, alice, "general", `n ${i}`)).id);
      }
      await waitSettled(s);
      const got = await drainDlv(dn, s.space, dave);
      assert.deepEqual(got.messages.map((m) => m.id).sort(), [...first].sort());
      // A join is ACL-gated too: general is no longer readable.
      await assert.rejects(
        deliveryRequest(dn, s.space, dave.principal, "durableJoin", { channel: "general" }),
        /may not read channel/,
      );
    });

    await t.step(
      "readHistory serves the newest messages, authorized fresh on every call",
      async () => {
        const bn = await connectAs(s.url, bob.creds);
        conns.push(bn);
        const last = [];
        for (let i = 0; i < 5; i++) {
          last.push((await post(an, s.space, alice, "general", `h ${i}`)).id);
        }
        const page = await deliveryRequest(bn, s.space, bob.principal, "readHistory", {
          channel: "general",
          limit: 3,
        });
        const ids = (page.messages as { id: string; channel: string }[]).map((m) => m.id);
        assert.deepEqual(ids, last.slice(-3));
        assert.equal(page.complete, false);
        assert.ok((page.messages as { channel: string }[]).every((m) => m.channel === "general"));
        // An agent whose read ACL is ops only: its history read of general is refused.
        const dave = await connectAs(
          s.url,
          (await s.agent("dave2", { allowSubscribe: ["ops"] })).creds,
        );
        conns.push(dave);
        await assert.rejects(
          deliveryRequest(dave, s.space, { owner: "local", actor: "dave2" }, "readHistory", {
            channel: "general",
          }),
          (err: Error & { code?: string }) => err.code === "not_allowed",
        );
        await assert.rejects(
          deliveryRequest(bn, s.space, bob.principal, "readHistory", { channel: "gen.*" }),
          (err: Error & { code?: string }) => err.code === "invalid_channel",
        );
      },
    );

    await t.step("the membership feed shows live and durable members", async () => {
      const admin = await connectAs(s.url, await s.mint("admin"));
      conns.push(admin);
      const kv = await bindKv(admin, bucketNames(s.space).membership);
      await waitFor(async () => {
        const e = await kv.get("local.bob");
        if (!e || e.operation !== "PUT") return false;
        const row = JSON.parse(new TextDecoder().decode(e.value));
        return row.live.includes("general") && row.durable.includes("general");
      }, { what: "bob's membership row", timeoutMs: 20_000 });
      const beat = await kv.get("=feed");
      assert.ok(beat && JSON.parse(new TextDecoder().decode(beat.value)).count >= 1);
    });

    await t.step("evictPrincipal kicks a live connection and confirms it is gone", async () => {
      const eve = await s.agent("eve");
      const victim = await connectAs(s.url, eve.creds, { reconnect: false });
      await victim.flush();
      const closed = victim.closed();
      const mgr = await connectAs(
        s.url,
        await mintCreds(s.auth, newIdentity(), "supervisor", {
          principal: { owner: "local", actor: "mgr" },
        }),
      );
      conns.push(mgr);
      const admin = { service: "delivery-admin" as const };
      const me = { owner: "local", actor: "mgr" };
      const r = await deliveryRequest(mgr, s.space, me, "evictPrincipal", {
        principal: "local.eve",
      }, admin);
      assert.ok((r.kicked as number) >= 1, JSON.stringify(r));
      assert.equal(r.verifiedGone, true);
      assert.equal(r.scanComplete, true);
      await closed;
      assert.ok(victim.isClosed());
      const ghost = await deliveryRequest(mgr, s.space, me, "evictPrincipal", {
        principal: "local.nobody",
      }, admin);
      assert.deepEqual([ghost.kicked, ghost.verifiedGone], [0, true]);
      await assert.rejects(
        deliveryRequest(mgr, s.space, me, "evictPrincipal", { principal: "foo.bar" }, admin),
        (err: Error & { code?: string }) => err.code === "invalid_principal",
      );
    });

    await t.step(
      "a request whose reply lies outside its own subtree is never answered",
      async () => {
        const bn = await connectAs(s.url, bob.creds);
        conns.push(bn);
        const subject = `cotal.${s.space}.ctl.delivery.local.bob`;
        // Bob may subscribe only his own reply subtree; the daemon must not reply on alice's.
        const inbox = bn.subscribe(`${subject}.reply.>`);
        bn.publish(subject, JSON.stringify({ op: "listMemberships", args: {} }), {
          reply: `cotal.${s.space}.ctl.delivery.local.alice.reply.x`,
        });
        await bn.flush();
        await new Promise((r) => setTimeout(r, 300));
        assert.equal(inbox.getProcessed(), 0);
        await daemon.waitForLine(/reply is not in its own subtree/);
      },
    );
  } finally {
    for (const ep of endpoints) await ep.stop().catch(() => {});
    for (const c of conns) {
      await (c as unknown as { close(): Promise<void> }).close().catch(() => {});
    }
    daemon.kill();
    const st = await daemon.exited;
    assert.equal(st.code, 0, daemon.stderr());
    assert.match(daemon.stderr(), /delivery daemon stopped/);
  }
});
