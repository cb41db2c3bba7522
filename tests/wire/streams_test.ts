import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { connect, nanos, RetentionPolicy, StorageType } from "nats";
import { isCotalError } from "../../lib/errors.ts";
import { newLifecycleUid } from "../../lib/trust/mod.ts";
import {
  bucketNames,
  ensureDefaultDeliveryClass,
  kvStreamName,
  readChannelRegistry,
  seedChannelRegistry,
  setupSpaceStreams,
  spaceBucketConfigs,
  spaceStreamConfigs,
  STREAM_LIMITS,
  streamNames,
} from "../../lib/wire/mod.ts";
import {
  CHAT_MAX_MESSAGE_BYTES,
  DIRECT_MAX_MESSAGE_BYTES,
  MEMBER_BACKLOG_CAP,
} from "../../lib/wire/streams.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { startTestBroker, uniqueSpace, waitFor } from "../_harness/broker.ts";
import { startSpaceBroker } from "./_space_broker.ts";

const S = 1e9;

Deno.test("wire - setupSpaceStreams creates the reference's streams and buckets with a provisioner cred", async () => {
  await using sb = await startSpaceBroker();
  const creds = await sb.mint("provisioner");
  const first = await setupSpaceStreams({ servers: sb.url, space: sb.space, creds });
  assert.equal(first.created.length, 13);
  assert.deepEqual(first.existing, []);

  const nc = await connectBroker({ servers: sb.url, creds });
  try {
    const jsm = await nc.jetstreamManager();
    const s = streamNames(sb.space);
    const b = bucketNames(sb.space);
    const P = `cotal.${sb.space}`;
    const chat = (await jsm.streams.info(s.chat)).config;
    assert.deepEqual(chat.subjects, [`${P}.chat.>`]);
    assert.equal(chat.retention, RetentionPolicy.Limits);
    assert.equal(chat.storage, StorageType.File);
    assert.equal(chat.num_replicas, 1);
    assert.equal(chat.max_msgs_per_subject, 1000);
    assert.equal(chat.allow_direct, false, "no stream answers Direct Get");
    assert.equal(chat.duplicate_window, 120 * S);
    // Every stream is capped by purpose (docs/SPEC.md, "Limits").
    for (const [kind, name] of Object.entries(s) as [keyof typeof STREAM_LIMITS, string][]) {
      const c = (await jsm.streams.info(name)).config;
      assert.equal(c.max_bytes, STREAM_LIMITS[kind].maxBytes, name);
      assert.equal(c.max_age, STREAM_LIMITS[kind].maxAgeMs * 1e6, name);
      assert.equal(c.max_msgs_per_subject, STREAM_LIMITS[kind].maxMsgsPerSubject, name);
      // A history window drops its oldest; DMs, tasks and a member's backlog refuse the
      // newest instead (the backlog per member: the daemon records the gap).
      const refuses = kind === "dm" || kind === "task" || kind === "dlv";
      assert.equal(c.discard, refuses ? "new" : "old", name);
    }
    assert.equal(chat.max_msg_size, CHAT_MAX_MESSAGE_BYTES, "a post fits the broker once framed");
    const dlv = (await jsm.streams.info(s.dlv)).config;
    assert.equal(dlv.retention, RetentionPolicy.Interest, "a member's read copies leave DLV");
    assert.equal(dlv.discard_new_per_subject, true);
    assert.equal(dlv.max_msgs_per_subject, MEMBER_BACKLOG_CAP);
    const dm = (await jsm.streams.info(s.dm)).config;
    assert.deepEqual(dm.subjects, [`${P}.inst.>`]);
    assert.equal(dm.allow_direct, false, "DM must never enable Direct Get");
    const task = (await jsm.streams.info(s.task)).config;
    // DM and TASK keep a message only while a durable waits for it, and only up to 64 KiB.
    for (const c of [dm, task]) {
      assert.equal(c.retention, RetentionPolicy.Interest, c.name);
      assert.equal(c.max_msg_size, DIRECT_MAX_MESSAGE_BYTES, c.name);
      assert.equal(c.discard_new_per_subject, true, c.name);
    }
    assert.equal(task.allow_direct, false);
    for (const [name, subj] of [[s.inbox, "dinbox"], [s.dlv, "dlv"]]) {
      const c = (await jsm.streams.info(name)).config;
      assert.deepEqual(c.subjects, [`${P}.${subj}.>`]);
      assert.equal(c.max_msgs_per_subject, name === s.dlv ? MEMBER_BACKLOG_CAP : 1000);
      assert.equal(c.duplicate_window, 7200 * S);
    }
    const presence = (await jsm.streams.info(`KV_${b.presence}`)).config;
    assert.equal(presence.max_age, 6 * S);
    assert.equal(presence.storage, StorageType.Memory);
    // Agents write it: no rollup (one would erase every row), small rows, a small cap.
    assert.equal(presence.allow_rollup_hdrs, false);
    assert.equal(presence.max_msg_size, 64 * 1024);
    assert.equal(presence.max_bytes, 16 * 1024 * 1024);
    assert.equal((await jsm.streams.info(`KV_${b.delivery}`)).config.max_age, 30 * S);
    assert.equal((await jsm.streams.info(`KV_${b.manager}`)).config.max_age, 10 * S);
    const channels = (await jsm.streams.info(`KV_${b.channels}`)).config;
    assert.equal(channels.max_msgs_per_subject, 1);
    assert.equal(channels.allow_rollup_hdrs, true);
    assert.equal(channels.allow_direct, false, "no bucket answers Direct Get");
    assert.equal(channels.max_age, 0);
    const feed = (await jsm.streams.info(`KV_${b.membership}`)).config;
    assert.equal(feed.max_bytes, 64 * 1024 * 1024);
    // The buckets are real KV buckets: nats.js binds and uses them.
    const kv = await nc.jetstream().views.kv(b.acl, { bindOnly: true });
    await kv.put("local.x.0123456789abcdefghijklmnop", "{}");
    assert.ok(await kv.get("local.x.0123456789abcdefghijklmnop"));
  } finally {
    await nc.close();
  }

  const second = await setupSpaceStreams({ servers: sb.url, space: sb.space, creds });
  assert.deepEqual(second.created, [], "a second run creates nothing");
  assert.equal(second.existing.length, 13);
  assert.deepEqual(second.reconciled, []);
});

Deno.test("wire - setupSpaceStreams reconciles the TTL of an existing presence bucket", async () => {
  await using sb = await startSpaceBroker();
  const creds = await sb.mint("provisioner");
  const b = bucketNames(sb.space);
  // An older setup left the presence bucket with a 60 s TTL.
  const stale = spaceBucketConfigs(sb.space).find((c) => c.config.name === `KV_${b.presence}`)!;
  const nc = await connectBroker({ servers: sb.url, creds });
  try {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({
      ...stale.config,
      max_age: nanos(60_000),
      duplicate_window: nanos(60_000),
    });
    const r = await setupSpaceStreams({ servers: sb.url, space: sb.space, creds });
    assert.deepEqual(r.reconciled, [{ stream: `KV_${b.presence}`, fromMs: 60_000, toMs: 6_000 }]);
    const cfg = (await jsm.streams.info(`KV_${b.presence}`)).config;
    assert.equal(cfg.max_age, 6 * S);
    assert.ok(cfg.duplicate_window <= cfg.max_age);
    assert.deepEqual(
      (await setupSpaceStreams({ servers: sb.url, space: sb.space, creds })).reconciled,
      [],
    );
  } finally {
    await nc.close();
  }
  // Observed, not just configured: an agent's presence row ages out of the bucket.
  const principal = { owner: "local", actor: "ttl_probe" };
  const agent = await sb.mint("agent", { principal, lifecycleUid: newLifecycleUid() });
  const anc = await connectBroker({ servers: sb.url, creds: agent });
  try {
    const kv = await anc.jetstream().views.kv(b.presence, { bindOnly: true });
    await kv.put("local.ttl_probe", JSON.stringify({ ts: Date.now() }));
    assert.ok(await kv.get("local.ttl_probe"));
    await waitFor(async () => (await kv.get("local.ttl_probe")) === null, {
      timeoutMs: 30_000,
      intervalMs: 250,
      what: "the presence row to expire under the reconciled 6 s TTL",
    });
  } finally {
    await anc.close();
  }
});

Deno.test("wire - setupSpaceStreams turns Direct Get off in place on streams and buckets that had it", async () => {
  await using sb = await startSpaceBroker();
  const creds = await sb.mint("provisioner");
  const nc = await connectBroker({ servers: sb.url, creds });
  try {
    const jsm = await nc.jetstreamManager();
    const { dm, chat } = streamNames(sb.space);
    // A DM stream and a space set up when CHAT and the buckets answered Direct Get.
    await jsm.streams.add({ name: dm, subjects: [`cotal.${sb.space}.inst.>`], allow_direct: true });
    await setupSpaceStreams({ servers: sb.url, space: sb.space, creds });
    await jsm.streams.update(chat, { allow_direct: true });
    const presence = kvStreamName(bucketNames(sb.space).presence);
    await jsm.streams.update(presence, { allow_direct: true });
    const r = await setupSpaceStreams({ servers: sb.url, space: sb.space, creds });
    assert.ok(r.limited.includes(chat) && r.limited.includes(presence), JSON.stringify(r));
    for (const st of [dm, chat, presence]) {
      assert.equal((await jsm.streams.info(st)).config.allow_direct, false, st);
    }
  } finally {
    await nc.close();
  }
});

Deno.test("wire - the delivery lease bucket stores its one key only; a space set up before is narrowed in place", async () => {
  await using sb = await startSpaceBroker();
  const creds = await sb.mint("provisioner");
  const nc = await connectBroker({ servers: sb.url, creds });
  try {
    const jsm = await nc.jetstreamManager();
    await setupSpaceStreams({ servers: sb.url, space: sb.space, creds });
    const bucket = bucketNames(sb.space).delivery;
    const lease = kvStreamName(bucket);
    assert.deepEqual((await jsm.streams.info(lease)).config.subjects, [`$KV.${bucket}.lease.0`]);
    // As an older setup made it: any key.
    await jsm.streams.update(lease, { subjects: [`$KV.${bucket}.>`] });
    const r = await setupSpaceStreams({ servers: sb.url, space: sb.space, creds });
    assert.ok(r.limited.includes(lease), JSON.stringify(r));
    assert.deepEqual((await jsm.streams.info(lease)).config.subjects, [`$KV.${bucket}.lease.0`]);
  } finally {
    await nc.close();
  }
});

Deno.test("wire - setupSpaceStreams with an agent cred is refused by the broker", async () => {
  await using sb = await startSpaceBroker();
  const creds = await sb.mint("agent", {
    principal: { owner: "local", actor: "a" },
    lifecycleUid: newLifecycleUid(),
  });
  await assert.rejects(
    setupSpaceStreams({ servers: sb.url, space: sb.space, creds }),
    (e: unknown) => isCotalError(e, "permission_denied"),
  );
});

Deno.test("wire - ensureDefaultDeliveryClass writes once and never overrides an operator's value", async () => {
  await using sb = await startSpaceBroker();
  const creds = await sb.mint("provisioner");
  const t = { servers: sb.url, space: sb.space, creds };
  await setupSpaceStreams(t);
  assert.equal(await ensureDefaultDeliveryClass({ ...t, deliveryClass: "durable" }), true);
  assert.equal(await ensureDefaultDeliveryClass({ ...t, deliveryClass: "live" }), false);
  assert.deepEqual((await readChannelRegistry(t)).defaults, { deliveryClass: "durable" });

  // An operator sets the default explicitly: a later ensure leaves it alone.
  await seedChannelRegistry({
    ...t,
    channels: {},
    defaults: { deliveryClass: "live", replay: false },
  });
  assert.equal(await ensureDefaultDeliveryClass({ ...t, deliveryClass: "durable" }), false);
  assert.deepEqual((await readChannelRegistry(t)).defaults, {
    deliveryClass: "live",
    replay: false,
  });
});

Deno.test("wire - ensureDefaultDeliveryClass fills the class in beside other operator defaults", async () => {
  await using sb = await startSpaceBroker();
  const creds = await sb.mint("provisioner");
  const t = { servers: sb.url, space: sb.space, creds };
  await setupSpaceStreams(t);
  await seedChannelRegistry({ ...t, channels: {}, defaults: { replayWindow: "2h" } });
  assert.equal(await ensureDefaultDeliveryClass({ ...t, deliveryClass: "live" }), true);
  assert.deepEqual((await readChannelRegistry(t)).defaults, {
    replayWindow: "2h",
    deliveryClass: "live",
  });
  await assert.rejects(
    ensureDefaultDeliveryClass({ ...t, deliveryClass: "sometimes" as "live" }),
    (e: unknown) => isCotalError(e, "invalid_delivery_class"),
  );
});

Deno.test("wire - channel registry seed and read, validated before any write", async () => {
  await using sb = await startSpaceBroker();
  const creds = await sb.mint("provisioner");
  const t = { servers: sb.url, space: sb.space, creds };
  await setupSpaceStreams(t);
  const r = await seedChannelRegistry({
    ...t,
    channels: {
      general: { replay: true, description: "everyone" },
      "team.backend": { deliveryClass: "live", replayWindow: "30m", instructions: "be brief" },
    },
  });
  assert.deepEqual(r.written, ["general", "team.backend"]);
  const refusals: [Record<string, unknown>, CotalErrorCode][] = [
    [{ "team.*": {} }, "invalid_channel"],
    [{ "foo/bar": {} }, "invalid_channel"],
    [{ x: { deliveryClass: "maybe" } }, "invalid_delivery_class"],
    [{ x: { replayWindow: "10 minutes" } }, "invalid_channel_config"],
    [{ x: { description: "d".repeat(201) } }, "invalid_channel_config"],
    [{ x: { instructions: "i".repeat(2001) } }, "invalid_channel_config"],
    [{ x: { colour: "red" } }, "invalid_channel_config"],
  ];
  for (const [channels, code] of refusals) {
    await assert.rejects(
      seedChannelRegistry({ ...t, channels: { ok: {}, ...channels } as never }),
      (e: unknown) => isCotalError(e, code),
      JSON.stringify(channels),
    );
  }
  const reg = await readChannelRegistry(t);
  assert.deepEqual(reg.channels, {
    general: { replay: true, description: "everyone" },
    "team.backend": { deliveryClass: "live", replayWindow: "30m", instructions: "be brief" },
  });
  assert.equal("ok" in reg.channels, false, "a refused seed wrote nothing");

  // Agents read the registry too.
  const agent = await sb.mint("agent", {
    principal: { owner: "local", actor: "reader" },
    lifecycleUid: newLifecycleUid(),
  });
  assert.deepEqual((await readChannelRegistry({ ...t, creds: agent })).channels, reg.channels);
});

Deno.test("wire - setupSpaceStreams works on an open broker without creds", async () => {
  await using broker = await startTestBroker();
  const space = uniqueSpace("open");
  const r = await setupSpaceStreams({ servers: broker.url, space });
  assert.equal(r.created.length, 13);
  const nc = await connect({ servers: broker.url });
  try {
    const names = await (await nc.jetstreamManager()).streams.names().next();
    assert.ok(names.includes(streamNames(space).chat));
  } finally {
    await nc.close();
  }
});

Deno.test("wire - setupSpaceStreams caps a space set up before the limits, in place", async () => {
  await using sb = await startSpaceBroker();
  const creds = await sb.mint("provisioner");
  const s = streamNames(sb.space);
  const b = bucketNames(sb.space);
  const nc = await connectBroker({ servers: sb.url, creds });
  try {
    const jsm = await nc.jetstreamManager();
    // An older setup: DM unbounded and keeping what nobody reads, presence accepting rollups.
    const dm = spaceStreamConfigs(sb.space).find((c) => c.config.name === s.dm)!;
    await jsm.streams.add({
      ...dm.config,
      retention: RetentionPolicy.Limits,
      max_msg_size: -1,
      max_bytes: -1,
      max_age: 0,
      max_msgs_per_subject: -1,
      discard_new_per_subject: false,
    });
    const pres = spaceBucketConfigs(sb.space).find((c) => c.config.name === `KV_${b.presence}`)!;
    await jsm.streams.add({ ...pres.config, allow_rollup_hdrs: true, max_msg_size: -1 });
    const r = await setupSpaceStreams({ servers: sb.url, space: sb.space, creds });
    assert.deepEqual(r.limited.sort(), [s.dm, `KV_${b.presence}`].sort());
    const dmNow = (await jsm.streams.info(s.dm)).config;
    assert.equal(dmNow.max_bytes, STREAM_LIMITS.dm.maxBytes);
    assert.equal(dmNow.max_msgs_per_subject, STREAM_LIMITS.dm.maxMsgsPerSubject);
    assert.equal(dmNow.max_msg_size, DIRECT_MAX_MESSAGE_BYTES);
    assert.equal(dmNow.retention, RetentionPolicy.Interest, "moved to interest in place");
    // A pair's message past its cap is refused, never an older one dropped (answers aimed at a pair).
    assert.equal(dmNow.discard_new_per_subject, true);
    const presNow = (await jsm.streams.info(`KV_${b.presence}`)).config;
    assert.equal(presNow.allow_rollup_hdrs, false);
    assert.equal(presNow.max_msg_size, 64 * 1024);
    assert.deepEqual(
      (await setupSpaceStreams({ servers: sb.url, space: sb.space, creds })).limited,
      [],
    );
  } finally {
    await nc.close();
  }
});

Deno.test("wire - DMs and tasks to names nobody reads are never stored; a flood to real recipients is refused at the byte cap, keeping what was stored", async () => {
  // DM and TASK exactly as Cotal configures them, with only DM's byte cap shrunk to 2 MiB so the
  // test fills it in a moment (the policy under test is what is kept, not the size).
  await using sb = await startSpaceBroker();
  const nc = await connectBroker({ servers: sb.url, creds: await sb.mint("provisioner") });
  try {
    const jsm = await nc.jetstreamManager();
    const s = streamNames(sb.space);
    const P = `cotal.${sb.space}`;
    const configs = spaceStreamConfigs(sb.space);
    const dm = configs.find((c) => c.config.name === s.dm)!;
    const task = configs.find((c) => c.config.name === s.task)!;
    await jsm.streams.add({ ...dm.config, max_bytes: 2 * 1024 * 1024 });
    await jsm.streams.add(task.config);
    // Recipients that exist have a durable, as provisioning makes them: bob, r0..r7, role review.
    const durable = (stream: string, name: string, filter: string) =>
      jsm.consumers.add(stream, {
        durable_name: name,
        filter_subject: filter,
        ack_policy: "explicit" as never,
      });
    for (const who of ["bob", ...Array.from({ length: 8 }, (_, i) => `r${i}`)]) {
      await durable(s.dm, `dm_${who}`, `${P}.inst.local.${who}.>`);
    }
    await durable(s.task, "svc_review", `${P}.svc.review.>`);
    // Each sender through its own agent cred, on the subjects its grants allow.
    const as = async (actor: string) =>
      await connectBroker({
        servers: sb.url,
        creds: await sb.mint("agent", {
          principal: { owner: "local", actor },
          lifecycleUid: newLifecycleUid(),
        }),
      });
    const alice = await as("alice");
    const mallory = await as("mallory");
    const chunk = new Uint8Array(60 * 1024);
    let kept = 0;
    let refused: unknown;
    try {
      kept = (await alice.jetstream().publish(`${P}.inst.local.bob.local.alice`, chunk)).seq;
      await alice.jetstream().publish(`${P}.svc.review.local.alice`, chunk);
      const js = mallory.jetstream();
      // Red team 6's Q and R: a flood to principals and roles that do not exist. The broker
      // acknowledges and keeps nothing of it.
      for (let i = 0; i < 64; i++) {
        await js.publish(`${P}.inst.local.nobody${i}.local.mallory`, chunk);
        await js.publish(`${P}.svc.nobody${i}.local.mallory`, chunk);
      }
      assert.equal((await jsm.streams.info(s.dm)).state.messages, 1, "only bob's DM is stored");
      assert.equal((await jsm.streams.info(s.task)).state.messages, 1, "only the review task");
      // Larger than a DM may be: refused by the stream itself (the library refuses it earlier).
      const big = await js.publish(`${P}.inst.local.bob.local.mallory`, new Uint8Array(65 * 1024))
        .then(() => undefined, (e) => e);
      assert.equal(big?.api_error?.err_code, 10054, String(big));
      // A flood to recipients that exist stops at the byte cap, told to the flooder at publish.
      for (let i = 0; i < 64 && !refused; i++) {
        await js.publish(`${P}.inst.local.r${i % 8}.local.mallory`, chunk).catch((e) =>
          refused = e
        );
      }
    } finally {
      await alice.close();
      await mallory.close();
    }
    // JetStream's own refusal: 10077 "maximum bytes exceeded".
    const api = (refused as { api_error?: { err_code: number; description: string } })?.api_error;
    assert.equal(api?.err_code, 10077, String(refused));
    assert.match(api!.description, /maximum bytes exceeded/);
    // Nothing was dropped to make room: the stream still begins at bob's DM.
    assert.equal((await jsm.streams.info(s.dm)).state.first_seq, kept);
  } finally {
    await nc.close();
  }
});

Deno.test("wire - a TASK work queue of an older setup is kept and reported as outdated, not refused", async () => {
  await using sb = await startSpaceBroker();
  const creds = await sb.mint("provisioner");
  const nc = await connectBroker({ servers: sb.url, creds });
  try {
    const jsm = await nc.jetstreamManager();
    const s = streamNames(sb.space);
    const task = spaceStreamConfigs(sb.space).find((c) => c.config.name === s.task)!;
    await jsm.streams.add({ ...task.config, retention: RetentionPolicy.Workqueue });
    const r = await setupSpaceStreams({ servers: sb.url, space: sb.space, creds });
    assert.deepEqual(r.outdated, [s.task]);
    assert.equal((await jsm.streams.info(s.task)).config.retention, RetentionPolicy.Workqueue);
    // Anything else in the wrong retention is still a conflict.
    const teardown = await connectBroker({ servers: sb.url, creds: await sb.mint("teardown") });
    await (await teardown.jetstreamManager()).streams.delete(s.chat).finally(() =>
      teardown.close()
    );
    const chat = spaceStreamConfigs(sb.space).find((c) => c.config.name === s.chat)!;
    await jsm.streams.add({ ...chat.config, retention: RetentionPolicy.Workqueue });
    await assert.rejects(
      () => setupSpaceStreams({ servers: sb.url, space: sb.space, creds }),
      (e: unknown) =>
        isCotalError(e, "stream_config_conflict") && /retention workqueue/.test(String(e)),
    );
  } finally {
    await nc.close();
  }
});

Deno.test("wire - a DLV made before member backlogs (limits, discard old) is moved to interest and discard-new per subject", async () => {
  await using sb = await startSpaceBroker();
  const creds = await sb.mint("provisioner");
  const nc = await connectBroker({ servers: sb.url, creds });
  try {
    const jsm = await nc.jetstreamManager();
    const s = streamNames(sb.space);
    const dlv = spaceStreamConfigs(sb.space).find((c) => c.config.name === s.dlv)!;
    // The old shape: every copy kept until it aged out, the oldest dropped at the cap.
    await jsm.streams.add({
      ...dlv.config,
      retention: RetentionPolicy.Limits,
      discard: "old" as never,
      discard_new_per_subject: false,
    });
    const r = await setupSpaceStreams({ servers: sb.url, space: sb.space, creds });
    assert.ok(r.limited.includes(s.dlv), JSON.stringify(r));
    const c = (await jsm.streams.info(s.dlv)).config;
    assert.equal(c.retention, RetentionPolicy.Interest);
    assert.equal(c.discard, "new");
    assert.equal(c.discard_new_per_subject, true);
  } finally {
    await nc.close();
  }
});

Deno.test("wire - one sender's share of CHAT, DM and TASK is a small part of each stream", () => {
  // A sender's share: what one subject of it may hold (per channel, recipient or role).
  const share = (kind: "chat" | "dm" | "task", max: number) =>
    STREAM_LIMITS[kind].maxMsgsPerSubject * max / STREAM_LIMITS[kind].maxBytes;
  assert.ok(share("chat", CHAT_MAX_MESSAGE_BYTES) <= 1 / 16, "CHAT: 16 channel shares or more");
  assert.ok(share("dm", DIRECT_MAX_MESSAGE_BYTES) <= 1 / 32, "DM: 32 recipients or more");
  assert.ok(share("task", DIRECT_MAX_MESSAGE_BYTES) <= 1 / 16, "TASK: 16 roles or more");
  // A member that never reads keeps its whole DLV backlog (red team 7's T): copies of posts.
  assert.ok(
    MEMBER_BACKLOG_CAP * CHAT_MAX_MESSAGE_BYTES / STREAM_LIMITS.dlv.maxBytes <= 1 / 30,
    "DLV: 30 members that never read or more",
  );
});
