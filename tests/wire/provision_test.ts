import assert from "node:assert/strict";
import { AckPolicy, DeliverPolicy, type NatsConnection } from "nats";
import { isCotalError } from "../../lib/errors.ts";
import { newIdentity, newLifecycleUid } from "../../lib/trust/mod.ts";
import {
  aclKey,
  bindKv,
  bucketNames,
  buildMessage,
  channelCovers,
  chathistDurableName,
  connectBroker,
  deprovisionAgent,
  dlvDurableName,
  dmDurableName,
  type Principal,
  provisionAgent,
  provisionAgentDurables,
  publishMessage,
  readAclRow,
  resolveChannelPolicy,
  setupSpaceStreams,
  streamNames,
} from "../../lib/wire/mod.ts";
import { startSpaceBroker } from "./_space_broker.ts";

const alice: Principal = { owner: "local", actor: "alice" };
const bob: Principal = { owner: "local", actor: "bob" };
const S = 1e9;

async function withConn<T>(servers: string, creds: string, fn: (nc: NatsConnection) => Promise<T>) {
  const nc = await connectBroker({ servers, creds });
  try {
    return await fn(nc);
  } finally {
    await nc.close();
  }
}

function dm(space: string, from: Principal, to: Principal, text: string) {
  return buildMessage({
    space,
    from: { id: `${from.owner}.${from.actor}`, name: from.actor },
    to: `${to.owner}.${to.actor}`,
    text,
  });
}

Deno.test("wire - channel policy defaults and subscribe-within-ACL check", () => {
  assert.deepEqual(resolveChannelPolicy(), {
    subscribe: ["general"],
    allowSubscribe: ["general"],
    allowPublish: [],
  });
  assert.deepEqual(resolveChannelPolicy({ allowSubscribe: [] }), {
    subscribe: [],
    allowSubscribe: [],
    allowPublish: [],
  });
  assert.deepEqual(
    resolveChannelPolicy({ subscribe: ["team.a"], allowSubscribe: ["team.>"], role: "rev" }).role,
    "rev",
  );
  assert.throws(
    () => resolveChannelPolicy({ subscribe: ["ops"], allowSubscribe: ["general"] }),
    (e: unknown) => isCotalError(e, "subscribe_outside_acl") && /ops/.test((e as Error).message),
  );
  assert.throws(
    () => resolveChannelPolicy({ subscribe: ["review"], allowSubscribe: ["review.>"] }),
    (e: unknown) => isCotalError(e, "subscribe_outside_acl"),
    "a.> does not cover a",
  );
  assert.throws(
    () => resolveChannelPolicy({ allowPublish: ["team.*"] }),
    (e: unknown) => isCotalError(e, "invalid_channel"),
  );
  assert.throws(
    () => resolveChannelPolicy({ allowSubscribe: ["foo/bar"] }),
    (e: unknown) => isCotalError(e, "invalid_channel"),
  );
  assert.ok(channelCovers("team.>", "team.*"));
  assert.ok(channelCovers("*.x", "a.x"));
  assert.ok(!channelCovers("team.*", "team.>"));
  assert.ok(!channelCovers("team.*", "team.a.b"));
});

Deno.test("wire - provisionAgentDurables pre-creates dm_, dlv_ and svc_ and writes the ACL row", async () => {
  await using sb = await startSpaceBroker();
  const prov = await sb.mint("provisioner");
  const t = { servers: sb.url, space: sb.space, creds: prov };
  await setupSpaceStreams(t);
  const uid = newLifecycleUid();
  const s = streamNames(sb.space);
  const P = `cotal.${sb.space}`;

  // A DM already stored before the lifecycle exists must not reach it (activation frontier).
  const bobCreds = await sb.mint("agent", { principal: bob, lifecycleUid: newLifecycleUid() });
  await withConn(sb.url, bobCreds, (nc) => publishMessage(nc, dm(sb.space, bob, alice, "old")));

  const r = await provisionAgentDurables({
    ...t,
    principal: alice,
    lifecycleUid: uid,
    subscribe: ["general"],
    allowSubscribe: ["general", "team.>"],
    role: "reviewer",
  });
  assert.deepEqual(r.created, [
    dmDurableName(alice, uid),
    dlvDurableName(alice, uid),
    "svc_reviewer",
  ]);
  assert.equal(r.aclKey, aclKey(alice, uid));

  await withConn(sb.url, prov, async (nc) => {
    const jsm = await nc.jetstreamManager();
    const d = (await jsm.consumers.info(s.dm, dmDurableName(alice, uid))).config;
    assert.equal(d.filter_subject, `${P}.inst.local.alice.>`);
    assert.equal(d.ack_policy, AckPolicy.Explicit);
    assert.equal(d.ack_wait, 60 * S);
    assert.equal(d.deliver_policy, DeliverPolicy.StartSequence);
    assert.equal(d.opt_start_seq, 2, "starts after the DM stream's last sequence at provision");
    assert.equal(d.inactive_threshold ?? 0, 0, "a bind-only durable must not be reaped");
    const l = (await jsm.consumers.info(s.dlv, dlvDurableName(alice, uid))).config;
    assert.equal(l.filter_subject, `${P}.dlv.local.alice.${uid}`);
    assert.equal(l.deliver_policy, DeliverPolicy.All);
    const q = (await jsm.consumers.info(s.task, "svc_reviewer")).config;
    assert.equal(q.filter_subject, `${P}.svc.reviewer.>`);
    const acl = bucketNames(sb.space).acl;
    const row = await readAclRow(await bindKv(nc, acl), acl, alice, uid);
    assert.deepEqual(row?.allowSubscribe, ["general", "team.>"]);
    assert.deepEqual(row?.issuedAllowSubscribe, ["general", "team.>"]);
    assert.equal(row?.revision, 1);
  });

  const again = await provisionAgentDurables({
    ...t,
    principal: alice,
    lifecycleUid: uid,
    allowSubscribe: ["general", "team.>"],
    role: "reviewer",
  });
  assert.deepEqual(again.created, [], "idempotent per lifecycle");
});

Deno.test("wire - provisioning refusals: second live lifecycle, foreign owner, wrong signer", async () => {
  await using sb = await startSpaceBroker();
  const prov = await sb.mint("provisioner");
  const t = { servers: sb.url, space: sb.space, creds: prov };
  await setupSpaceStreams(t);
  await provisionAgentDurables({ ...t, principal: alice, lifecycleUid: newLifecycleUid() });
  await assert.rejects(
    provisionAgentDurables({ ...t, principal: alice, lifecycleUid: newLifecycleUid() }),
    (e: unknown) =>
      isCotalError(e, "lifecycle_still_live") && /deprovision/.test((e as Error).message),
  );
  await assert.rejects(
    provisionAgentDurables({
      ...t,
      principal: { owner: "UABCDEF", actor: "x" },
      lifecycleUid: newLifecycleUid(),
    }),
    (e: unknown) => isCotalError(e, "invalid_principal"),
  );
  await assert.rejects(
    provisionAgentDurables({ ...t, principal: bob, lifecycleUid: "not-a-uid" }),
    (e: unknown) => isCotalError(e, "invalid_lifecycle_uid"),
  );
  await assert.rejects(
    provisionAgent({
      ...t,
      auth: { ...sb.auth, space: "elsewhere" },
      identity: newIdentity(),
      principal: bob,
      lifecycleUid: newLifecycleUid(),
    }),
    (e: unknown) => isCotalError(e, "space_mismatch"),
  );
  // A live-only launch writes no ACL row, so it does not count as a live lifecycle.
  const liveOnly = await provisionAgentDurables({
    ...t,
    principal: bob,
    lifecycleUid: newLifecycleUid(),
    durableMembership: false,
  });
  assert.equal(liveOnly.aclKey, undefined);
});

Deno.test("wire - durables are bind-only: an agent cred cannot create a consumer", async () => {
  await using sb = await startSpaceBroker();
  const prov = await sb.mint("provisioner");
  const t = { servers: sb.url, space: sb.space, creds: prov };
  await setupSpaceStreams(t);
  const uid = newLifecycleUid();
  const a = await provisionAgent({
    ...t,
    auth: sb.auth,
    identity: newIdentity(),
    principal: alice,
    lifecycleUid: uid,
    role: "reviewer",
  });
  const b = await provisionAgent({
    ...t,
    auth: sb.auth,
    identity: newIdentity(),
    principal: bob,
    lifecycleUid: newLifecycleUid(),
  });
  const s = streamNames(sb.space);
  const P = `cotal.${sb.space}`;
  await withConn(sb.url, a.creds, async (nc) => {
    const jsm = await nc.jetstreamManager();
    const attempts: [string, string, string][] = [
      [s.dm, "snoop", `${P}.inst.>`],
      [s.dm, dmDurableName(alice, uid), `${P}.inst.local.alice.>`],
      [s.task, "grab", `${P}.svc.>`],
      [s.dlv, "peek", `${P}.dlv.>`],
    ];
    for (const [stream, name, filter] of attempts) {
      await assert.rejects(
        jsm.consumers.add(stream, {
          durable_name: name,
          filter_subject: filter,
          ack_policy: AckPolicy.Explicit,
        }),
        (e: unknown) => /permission/i.test(String(e)),
        `${stream}/${name} must be refused by the broker`,
      );
    }
    await assert.rejects(
      jsm.consumers.info(s.dm, dmDurableName(bob, "0".repeat(26))),
      (e: unknown) => /permission/i.test(String(e)),
      "another agent's durable is not even visible",
    );
    // Positive control: the pre-created durables bind.
    assert.ok(await jsm.consumers.info(s.dm, a.durables.dm));
    assert.ok(await jsm.consumers.info(s.dlv, a.durables.dlv));
    assert.ok(await jsm.consumers.info(s.task, "svc_reviewer"));
  });

  // A DM sent after provisioning reaches alice's bound durable and acks.
  await withConn(sb.url, b.creds, (nc) => publishMessage(nc, dm(sb.space, bob, alice, "hello")));
  await withConn(sb.url, a.creds, async (nc) => {
    const c = await nc.jetstream().consumers.get(s.dm, a.durables.dm);
    const m = await c.next({ expires: 5000 });
    assert.ok(m, "the DM arrived on the bind-only durable");
    assert.equal(JSON.parse(new TextDecoder().decode(m.data)).parts[0].text, "hello");
    m.ack();
    await nc.flush();
  });
});

Deno.test("wire - agent grants follow allowPublish: default-deny, no forged sender", async () => {
  await using sb = await startSpaceBroker();
  const prov = await sb.mint("provisioner");
  const t = { servers: sb.url, space: sb.space, creds: prov };
  await setupSpaceStreams(t);
  const quiet = await provisionAgent({
    ...t,
    auth: sb.auth,
    identity: newIdentity(),
    principal: alice,
    lifecycleUid: newLifecycleUid(),
  });
  const poster = await provisionAgent({
    ...t,
    auth: sb.auth,
    identity: newIdentity(),
    principal: bob,
    lifecycleUid: newLifecycleUid(),
    allowPublish: ["general"],
  });
  const post = (p: Principal, channel: string) =>
    buildMessage({
      space: sb.space,
      from: { id: `${p.owner}.${p.actor}`, name: p.actor },
      channel,
      text: "x",
    });
  await withConn(sb.url, quiet.creds, async (nc) => {
    await assert.rejects(
      publishMessage(nc, post(alice, "general")),
      (e: unknown) => isCotalError(e, "permission_denied"),
    );
  });
  await withConn(sb.url, poster.creds, async (nc) => {
    const ack = await publishMessage(nc, post(bob, "general"));
    assert.equal(ack.stream, streamNames(sb.space).chat);
    await assert.rejects(
      publishMessage(nc, post(bob, "ops")),
      (e: unknown) => isCotalError(e, "permission_denied"),
    );
    await assert.rejects(
      publishMessage(nc, post(alice, "general")),
      (e: unknown) => isCotalError(e, "permission_denied"),
      "the broker forge-locks the sender tokens",
    );
  });
});

Deno.test("wire - deprovisionAgent removes the durables and the ACL row", async () => {
  await using sb = await startSpaceBroker();
  const prov = await sb.mint("provisioner");
  const t = { servers: sb.url, space: sb.space, creds: prov };
  await setupSpaceStreams(t);
  const uid = newLifecycleUid();
  const r = await provisionAgentDurables({ ...t, principal: alice, lifecycleUid: uid });
  const target = { owner: alice.owner, actor: alice.actor, lifecycleUid: uid };

  const other = await sb.mint("deprovisioner", {
    deprovisionTarget: { ...target, lifecycleUid: newLifecycleUid() },
  });
  await assert.rejects(
    deprovisionAgent({
      servers: sb.url,
      space: sb.space,
      creds: other,
      principal: alice,
      lifecycleUid: uid,
    }),
    (e: unknown) => isCotalError(e, "permission_denied"),
    "a deprovisioner pinned to another lifecycle cannot remove this one",
  );

  // Alice's history consumer, made durable as red team 20a did (it would outlive her).
  const hist = chathistDurableName(alice, uid);
  const s = streamNames(sb.space);
  const agentCreds = await sb.mint("agent", {
    principal: alice,
    lifecycleUid: uid,
    allowSubscribe: ["general"],
  });
  await withConn(sb.url, agentCreds, async (nc) => {
    const jsm = await nc.jetstreamManager();
    await jsm.consumers.add(s.chat, {
      name: hist,
      durable_name: hist,
      filter_subject: `cotal.${sb.space}.chat.*.*.general`,
      ack_policy: AckPolicy.Explicit,
    });
  });

  const creds = await sb.mint("deprovisioner", { deprovisionTarget: target });
  const d = await deprovisionAgent({
    servers: sb.url,
    space: sb.space,
    creds,
    principal: alice,
    lifecycleUid: uid,
  });
  assert.deepEqual(d.removed, [r.durables.dm, r.durables.dlv, hist]);
  assert.equal(d.aclPurged, true);

  await withConn(sb.url, prov, async (nc) => {
    const jsm = await nc.jetstreamManager();
    await assert.rejects(jsm.consumers.info(s.dm, r.durables.dm), /not found/i);
    await assert.rejects(jsm.consumers.info(s.dlv, r.durables.dlv), /not found/i);
    const acl = bucketNames(sb.space).acl;
    assert.equal(await readAclRow(await bindKv(nc, acl), acl, alice, uid), undefined);
  });
  await withConn(sb.url, agentCreds, async (nc) => {
    const jsm = await nc.jetstreamManager();
    await assert.rejects(jsm.consumers.info(s.chat, hist), /not found/i);
  });
  const again = await deprovisionAgent({
    servers: sb.url,
    space: sb.space,
    creds,
    principal: alice,
    lifecycleUid: uid,
  });
  assert.deepEqual(again.removed, []);
  assert.deepEqual(again.absent, [r.durables.dm, r.durables.dlv, hist]);
  // The alias is free again: a new lifecycle provisions.
  const next = await provisionAgentDurables({
    ...t,
    principal: alice,
    lifecycleUid: newLifecycleUid(),
  });
  assert.equal(next.created.length, 2);
});
