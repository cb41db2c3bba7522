/**
 * What a space may store, as the broker enforces it: the limits signed into each space's
 * account JWT, an older account re-stated with the same keys, and an agent that tries to open
 * consumers at will.
 */
import assert from "node:assert/strict";
import { AckPolicy } from "nats";
import { uniqueSpace, waitFor } from "../_harness/broker.ts";
import {
  CONNECTION_LIMITS,
  createBrokerAuth,
  createSpaceAuth,
  hasSpaceLimits,
  MEMBER_MAX_PAYLOAD_BYTES,
  mintCreds,
  newIdentity,
  newLifecycleUid,
  SPACE_JETSTREAM_LIMITS,
} from "../../lib/trust/mod.ts";
import { encodeJwt, seedSigner } from "../../lib/nats/mod.ts";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";
import { ensureSpaceAccount, loadSpaceAccount } from "../../lib/mesh/trust_state.ts";
import { MemorySecretStore } from "../../lib/workspace/mod.ts";
import { serializeSpaceAccountAuth } from "../../lib/trust/mod.ts";
import { spaceAccountKey } from "../../lib/workspace/mod.ts";
import { connectCreds, deniedBy, startAuthBroker } from "./_helpers.ts";
import { names, provisionSpace } from "./_space.ts";

Deno.test("trust - a space's account carries frozen storage limits the broker enforces", async () => {
  assert.ok(Object.isFrozen(SPACE_JETSTREAM_LIMITS));
  const space = uniqueSpace("limits");
  const auth = await createSpaceAuth(space);
  assert.ok(hasSpaceLimits(auth.account.jwt));
  await using broker = await startAuthBroker(auth, [auth]);
  const uid = newLifecycleUid();
  await provisionSpace(broker.url, auth, [{ owner: "local", actor: "alice", uid }]);
  const alice = await connectCreds(
    broker.url,
    await mintCreds(auth, newIdentity(), "agent", {
      principal: { owner: "local", actor: "alice" },
      lifecycleUid: uid,
      allowSubscribe: ["general"],
      allowPublish: ["general"],
    }),
  );
  try {
    // What the broker says this account may use.
    const info = await (await alice.jetstreamManager()).getAccountInfo();
    assert.equal(info.limits.max_storage, SPACE_JETSTREAM_LIMITS.disk_storage);
    assert.equal(info.limits.max_memory, SPACE_JETSTREAM_LIMITS.mem_storage);
    assert.equal(info.limits.max_streams, SPACE_JETSTREAM_LIMITS.streams);
    assert.equal(info.limits.max_consumers, SPACE_JETSTREAM_LIMITS.consumer);
    // Consumers at will: 200 attempts, on every stream and bucket it can see, any name.
    const n = names(space);
    const jsm = await alice.jetstreamManager();
    let made = 0;
    for (let i = 0; i < 200; i++) {
      const st = [n.CHAT, n.DM, n.TASK, `KV_${n.presence}`, `KV_${n.channels}`][i % 5];
      const ok = !(await deniedBy(jsm.consumers.add(st, {
        name: `flood${i}`,
        ack_policy: AckPolicy.None,
        ...(i % 2 ? { deliver_subject: `${n.P}.inst.local.bob.local.alice` } : {}),
      })));
      if (ok) made++;
    }
    assert.equal(made, 0, "an agent opened consumers of its own choosing");
  } finally {
    await alice.close();
  }
});

Deno.test("trust - an account signed before the limits is re-stated with the same keys", async () => {
  const broker = await createBrokerAuth("test");
  const store = new MemorySecretStore();
  const space = uniqueSpace("restate");
  const { account } = await ensureSpaceAccount(store, broker, space);
  // The same account as an older build signed it: JetStream unlimited.
  const claims = decodeJwtUnverified(account.account.jwt);
  const old = await encodeJwt({
    sub: claims.sub,
    name: claims.name,
    nats: {
      ...(claims.nats as unknown as Record<string, unknown>),
      limits: { conn: -1, mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 },
    } as never,
  }, await seedSigner(broker.operator.seed));
  await store.put(
    spaceAccountKey(space),
    serializeSpaceAccountAuth({ ...account, account: { ...account.account, jwt: old } }),
  );
  assert.equal(hasSpaceLimits(old), false);
  const { account: now, created } = await ensureSpaceAccount(store, broker, space);
  assert.equal(created, false);
  assert.ok(hasSpaceLimits(now.account.jwt));
  assert.equal(now.account.pub, account.account.pub);
  assert.equal(now.account.signingPub, account.account.signingPub);
  assert.ok(hasSpaceLimits((await loadSpaceAccount(store, space))!.account.jwt));
});

Deno.test("trust - an agent's connection holds at most 1000 subscriptions", async () => {
  assert.ok(Object.isFrozen(CONNECTION_LIMITS) && Object.isFrozen(CONNECTION_LIMITS.agent));
  const space = uniqueSpace("subs");
  const auth = await createSpaceAuth(space);
  await using broker = await startAuthBroker(auth, [auth]);
  const uid = newLifecycleUid();
  await provisionSpace(broker.url, auth, [{ owner: "local", actor: "alice", uid }]);
  const creds = await mintCreds(auth, newIdentity(), "agent", {
    principal: { owner: "local", actor: "alice" },
    lifecycleUid: uid,
    allowSubscribe: ["general"],
  });
  const alice = await connectCreds(broker.url, creds);
  const errors: string[] = [];
  (async () => {
    for await (const s of alice.status()) {
      if (s.type === "error") {
        errors.push((s.data as { message?: string })?.message ?? String(s.data));
      }
    }
  })().catch(() => {});
  try {
    const n = names(space);
    // 1000 subscriptions are fine; each of the next 100 is refused by the broker.
    for (let i = 0; i < 1_000; i++) alice.subscribe(`${n.P}.chat.*.*.general`);
    await alice.flush();
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(errors, []);
    for (let i = 0; i < 100; i++) alice.subscribe(`${n.P}.chat.*.*.general`);
    await alice.flush().catch(() => {});
    await waitFor(() => errors.length === 100, { what: "the broker's refusals" });
  } finally {
    await alice.close().catch(() => {});
  }
});

Deno.test("trust - an agent's connection publishes at most 128 KiB a message; the broker closes one that sends more", async () => {
  assert.equal(CONNECTION_LIMITS.agent?.payload, MEMBER_MAX_PAYLOAD_BYTES);
  const space = uniqueSpace("payload");
  const auth = await createSpaceAuth(space);
  await using broker = await startAuthBroker(auth, [auth]);
  const uid = newLifecycleUid();
  await provisionSpace(broker.url, auth, [{ owner: "local", actor: "alice", uid }]);
  const creds = await mintCreds(auth, newIdentity(), "agent", {
    principal: { owner: "local", actor: "alice" },
    lifecycleUid: uid,
    allowSubscribe: ["general"],
  });
  const presence = `$KV.${names(space).presence}.local.alice`;
  const alice = await connectCreds(broker.url, creds);
  try {
    // At the cap: taken (the presence bucket refuses a row that large, on its own terms).
    alice.publish(presence, new Uint8Array(MEMBER_MAX_PAYLOAD_BYTES));
    await alice.flush();
    assert.equal(alice.isClosed(), false);
    // The broker tells the client its cap, so npm:nats refuses one byte more itself.
    assert.equal(alice.info?.max_payload, MEMBER_MAX_PAYLOAD_BYTES);
    assert.throws(
      () => alice.publish(presence, new Uint8Array(MEMBER_MAX_PAYLOAD_BYTES + 1)),
      /MAX_PAYLOAD_EXCEEDED/,
    );
    // A client that ignores it (a hostile one): the broker ends the connection, saying why.
    const said: string[] = [];
    (async () => {
      for await (const st of alice.status()) {
        said.push(`${st.type} ${(st.data as unknown as Error)?.message ?? String(st.data)}`);
      }
    })().catch(() => {});
    (alice.info as { max_payload: number }).max_payload = 1024 * 1024;
    alice.publish(presence, new Uint8Array(MEMBER_MAX_PAYLOAD_BYTES + 1));
    // npm:nats names the broker's `-ERR 'Maximum Payload Violation'` a protocol error.
    await waitFor(() => said.some((l) => l === "error NATS_PROTOCOL_ERR"), {
      what: "the broker's Maximum Payload Violation",
    });
    await waitFor(() => said.some((l) => l.startsWith("disconnect")), {
      what: "the broker closing the connection",
    });
  } finally {
    await alice.close().catch(() => {});
  }
});
