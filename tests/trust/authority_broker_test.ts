/**
 * Trust boundaries at connect: expiry, foreign operators and accounts, same-named spaces,
 * account isolation on a shared broker, and signing-key rotation with a reload.
 */
import assert from "node:assert/strict";
import { uniqueSpace, waitFor } from "../_harness/broker.ts";
import {
  composeSpaceAuth,
  createBrokerAuth,
  createSpaceAccountAuth,
  createSpaceAuth,
  mintCreds,
  newIdentity,
  newLifecycleUid,
  rotateDataAccountSigningKey,
  serverConfig,
} from "../../lib/trust/mod.ts";
import {
  connectAccepted,
  connectCreds,
  connectRefused,
  credsClaims,
  delivered,
  startAuthBroker,
} from "./_helpers.ts";

Deno.test("trust - an expired cred is refused at connect", async () => {
  const auth = await createSpaceAuth(uniqueSpace("exp"));
  await using b = await startAuthBroker(auth, [auth]);
  const creds = await mintCreds(auth, newIdentity(), "probe", { expiresInSeconds: 3 });
  const { exp } = await credsClaims(creds);
  // Accepted while valid (3 s: NATS compares whole seconds, so 1 s can lapse mid-connect)...
  await (await connectCreds(b.url, creds)).close();
  // ...refused once the broker's clock passes exp (NATS compares whole seconds).
  await waitFor(() => Date.now() / 1000 > exp! + 1, {
    timeoutMs: 8000,
    what: "the cred to expire",
  });
  assert.match(await connectRefused(b.url, creds), /expired|authorization violation/i);
});

Deno.test("trust - creds of another operator or another space's account are refused", async () => {
  const space = uniqueSpace("foreign");
  const auth = await createSpaceAuth(space);
  // Same space name, fresh chain: a different operator and account.
  const twin = await createSpaceAuth(space);
  assert.notEqual(twin.account.pub, auth.account.pub);
  // Same operator, but an account the broker was never given.
  const sibling = composeSpaceAuth(auth, await createSpaceAccountAuth(auth, uniqueSpace("sib")));
  await using b = await startAuthBroker(auth, [auth]);
  await (await connectCreds(b.url, await mintCreds(auth, newIdentity(), "probe"))).close();
  for (const other of [twin, sibling]) {
    const creds = await mintCreds(other, newIdentity(), "probe");
    assert.match(await connectRefused(b.url, creds), /authorization violation/i);
  }
});

Deno.test("trust - two createSpaceAuth of one name cannot use each other's creds", async () => {
  const x1 = await createSpaceAuth("x");
  const x2 = await createSpaceAuth("x");
  await using b1 = await startAuthBroker(x1, [x1]);
  await using b2 = await startAuthBroker(x2, [x2]);
  const c1 = await mintCreds(x1, newIdentity(), "probe");
  const c2 = await mintCreds(x2, newIdentity(), "probe");
  await (await connectCreds(b1.url, c1)).close();
  await (await connectCreds(b2.url, c2)).close();
  assert.match(await connectRefused(b1.url, c2), /authorization violation/i);
  assert.match(await connectRefused(b2.url, c1), /authorization violation/i);
});

Deno.test("trust - two spaces on one broker: space A sees nothing of space B", async () => {
  // "team a" and "team/a" share the wire token team_a: identical subjects and stream names,
  // so only the account boundary keeps them apart.
  const broker = await createBrokerAuth("shared");
  const a = composeSpaceAuth(broker, await createSpaceAccountAuth(broker, "team a"));
  const bb = composeSpaceAuth(broker, await createSpaceAccountAuth(broker, "team/a"));
  await using b = await startAuthBroker(broker, [a, bb]);
  const prov = async (s: typeof a) => {
    const nc = await connectCreds(b.url, await mintCreds(s, newIdentity(), "provisioner"));
    await (await nc.jetstreamManager()).streams.add({
      name: "CHAT_team_a",
      subjects: ["cotal.team_a.chat.>"],
    });
    await nc.close();
  };
  await prov(a);
  await prov(bb);
  const op = (s: typeof a, actor: string) =>
    mintCreds(s, newIdentity(), "operator", { principal: { owner: "local", actor } });
  const opA = await connectCreds(b.url, await op(a, "ann"));
  const opB = await connectCreds(b.url, await op(bb, "ben"));
  const adminA = await connectCreds(b.url, await mintCreds(a, newIdentity(), "admin"));
  try {
    let leaked = 0;
    const taps = ["cotal.team_a.chat.>", "cotal.team_a.inst.>"].map((subject) =>
      adminA.subscribe(subject, { callback: (_e, m) => m.subject.includes(".ben") && leaked++ })
    );
    await adminA.flush();
    await opB.jetstream().publish("cotal.team_a.chat.local.ben.general", "from B");
    await opB.publish("cotal.team_a.inst.local.ann.local.ben", "dm from B");
    // A's own traffic arrives on the same tap, so the tap is live when B's would have.
    assert.ok(await delivered(opA, adminA, "cotal.team_a.chat.>", "cotal.team_a.chat.local.ann.x"));
    await adminA.flush();
    assert.equal(leaked, 0);
    const info = await (await adminA.jetstreamManager()).streams.info("CHAT_team_a");
    assert.equal(info.state.messages, 1, "only A's own message is in A's CHAT_team_a");
    for (const t of taps) t.unsubscribe();
  } finally {
    for (const nc of [opA, opB, adminA]) await nc.close();
  }
});

Deno.test("trust - after rotation and a reload, old-key creds are refused and new ones work", async () => {
  const auth = await createSpaceAuth(uniqueSpace("rot"));
  await using b = await startAuthBroker(auth, [auth]);
  const old = await mintCreds(auth, newIdentity(), "probe");
  await (await connectCreds(b.url, old)).close();
  const rotated = await rotateDataAccountSigningKey(auth);
  // Until the broker reloads, it still trusts the old key and not the new one.
  assert.match(
    await connectRefused(b.url, await mintCreds(rotated, newIdentity(), "probe")),
    /authorization violation/i,
  );
  await b.reload(serverConfig(rotated, [rotated], { port: b.port, storeDir: b.storeDir }));
  assert.match(await connectRefused(b.url, old), /authorization violation/i);
  assert.match(
    await connectRefused(b.url, await mintCreds(auth, newIdentity(), "probe")),
    /authorization violation/i,
  );
  const fresh = await connectCreds(b.url, await mintCreds(rotated, newIdentity(), "probe"));
  await fresh.close();
});

Deno.test("trust - max_control_line admits large agent JWTs; oversized grants are refused at mint", async () => {
  const auth = await createSpaceAuth(uniqueSpace("line"));
  await using b = await startAuthBroker(auth, [auth]);
  const many = Array.from({ length: 100 }, (_, i) => `channel-${i}`);
  const creds = await mintCreds(auth, newIdentity(), "agent", {
    lifecycleUid: newLifecycleUid(),
    allowSubscribe: many,
    allowPublish: many,
  });
  assert.ok(
    creds.length > 4 * 4096,
    `a ${creds.length}-byte creds file, far past the 4 KiB default`,
  );
  await connectAccepted(b.url, creds);
  const tooMany = Array.from({ length: 400 }, (_, i) => `channel-${i}`);
  await assert.rejects(
    mintCreds(auth, newIdentity(), "agent", {
      lifecycleUid: newLifecycleUid(),
      allowSubscribe: tooMany,
      allowPublish: tooMany,
    }),
    (err: { code?: string }) => err.code === "creds_too_large",
  );
});
