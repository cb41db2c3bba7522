/**
 * The signer's rail under a flood. A core subscription takes whatever its publishers send as fast
 * as they send it: four connections of a supervisor's cred sending 1 MB messages on its own rail
 * got the signer's connection cut by the broker as a slow consumer 5 to 7 times in 3,000 messages,
 * and honest requests waited for its reconnects. The rail is now a stream the signer pulls from
 * (lib/signer/rail.ts).
 */
import assert from "node:assert/strict";
import { signRailTokenFor } from "../../lib/trust/mod.ts";
import { headers as natsHeaders, type NatsConnection } from "nats";
import { remoteSigner } from "../../lib/signer/mod.ts";
import { SIGN_RAIL_LIMITS, signRailStream } from "../../lib/signer/rail.ts";
import { signRail, spaceNames } from "../../lib/trust/grant_names.ts";
import { mintCreds, mintWith, newIdentity } from "../../lib/trust/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { type DeliverySpace, startDeliverySpace } from "../delivery/_helpers.ts";
import { startSigner } from "./_signer.ts";

const SUPERVISOR = { owner: "local", actor: "manager_fl" };

/** Every directory under `dir`, depth first. */
async function* walk(
  dir: string,
): AsyncGenerator<{ path: string; name: string; isDirectory: boolean }> {
  for await (const e of Deno.readDir(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) {
      yield { path, name: e.name, isDirectory: true };
      yield* walk(path);
    }
  }
}

/** `count` messages of `bytes` on the supervisor's rail from `conns`, as fast as they go. */
async function flood(
  s: DeliverySpace,
  conns: NatsConnection[],
  count: number,
  bytes: number,
  proofHeader: boolean,
): Promise<void> {
  const root = spaceNames(s.space).root;
  // A compromised supervisor: its creds carry the rail's token.
  const token = await signRailTokenFor(s.auth);
  const body = new Uint8Array(proofHeader ? 10 : bytes).fill(120);
  const h = natsHeaders();
  // A header as large as the body: the proof header's name, so the signer takes it for a proof.
  h.set("Cotal-Caller-Jwt", "x".repeat(bytes));
  await Promise.all(conns.map(async (c) => {
    for (let i = 0; i < count / conns.length; i++) {
      const nonce = crypto.randomUUID().replaceAll("-", "");
      c.publish(
        signRail.request(root, token, SUPERVISOR.owner, SUPERVISOR.actor, nonce),
        body,
        proofHeader ? { headers: h } : {},
      );
    }
    await c.flush();
  }));
}

for (const proofHeader of [false, true]) {
  const what = proofHeader ? "headers" : "bodies";
  Deno.test(`signer - 1 MB ${what} from four connections of a supervisor's cred never cut the signer's connection, and honest requests are answered throughout`, async () => {
    await using s = await startDeliverySpace({ prefix: "signfl" });
    const daemon = startSigner(s);
    const creds = await mintCreds(s.auth, newIdentity(), "supervisor", { principal: SUPERVISOR });
    const nc = await connectBroker({ servers: s.url, creds });
    const floods = await Promise.all(
      [0, 1, 2, 3].map(() => connectBroker({ servers: s.url, creds })),
    );
    const signer = remoteSigner({
      nc,
      space: s.space,
      principal: SUPERVISOR,
      creds: () => creds,
      timeoutMs: 30_000,
    });
    try {
      await daemon.waitForLine(/cotal-signer up for space/);
      let flooding = true;
      let honest = 0;
      const honestLoop = (async () => {
        while (flooding) {
          await mintWith(signer, newIdentity(), "agent", {
            principal: { owner: "local", actor: "a1" },
            lifecycleUid: newLifecycleUid(),
          });
          honest++;
        }
      })();
      await flood(s, floods, 3_000, 1_000_000, proofHeader);
      flooding = false;
      await honestLoop;
      assert.ok(honest > 0, "no honest request was answered during the flood");
      // After it, at once.
      await mintWith(signer, newIdentity(), "agent", {
        principal: { owner: "local", actor: "a2" },
        lifecycleUid: newLifecycleUid(),
      });
      assert.doesNotMatch(daemon.stderr(), /lost its broker connection/);
    } finally {
      signer.close();
      for (const c of [nc, ...floods]) await c.close().catch(() => {});
      daemon.child.kill("SIGTERM");
      await daemon.child.status;
    }
  });
}

Deno.test("signer - the rail's stream refuses a message over its cap before the signer reads it, a broker restart keeps it, and one lost with the broker's store is made again", async () => {
  await using s = await startDeliverySpace({ prefix: "signrl" });
  const daemon = startSigner(s);
  const creds = await mintCreds(s.auth, newIdentity(), "supervisor", { principal: SUPERVISOR });
  let nc = await connectBroker({ servers: s.url, creds });
  const signer = () =>
    remoteSigner({ nc, space: s.space, principal: SUPERVISOR, creds: () => creds });
  try {
    await daemon.waitForLine(/cotal-signer up for space/);
    const root = spaceNames(s.space).root;
    const token = await signRailTokenFor(s.auth);
    const subject = signRail.request(root, token, SUPERVISOR.owner, SUPERVISOR.actor, "n1");
    // A publish that asks for the stream's answer hears the refusal.
    const big = new Uint8Array(SIGN_RAIL_LIMITS.maxMsgBytes + 1);
    await assert.rejects(
      nc.jetstream().publish(subject, big),
      /message size exceeds maximum allowed|maximum message size/i,
    );
    // Only the signer's own cred reaches the stream's API (not even the operator's admin).
    const admin = await connectBroker({ servers: s.url, creds: await s.mint("admin") });
    await assert.rejects(
      (await admin.jetstreamManager()).streams.info(signRailStream(s.space)),
      /Permissions Violation/,
    );
    await admin.close();
    const own = await connectBroker({
      servers: s.url,
      creds: await s.mint("signer", { principal: { owner: "local", actor: "signer" } }),
    });
    const info = await (await own.jetstreamManager()).streams.info(signRailStream(s.space));
    assert.equal(info.config.max_msg_size, SIGN_RAIL_LIMITS.maxMsgBytes);
    await own.close();
    await mintWith(signer(), newIdentity(), "agent", {
      principal: { owner: "local", actor: "a1" },
      lifecycleUid: newLifecycleUid(),
    });

    // A restart keeps the stream (on disk): nothing is made again, and the rail serves.
    await nc.close();
    await s.killBroker();
    await s.startBroker();
    await daemon.waitForLine(/reconnected to the broker/, 30_000);
    nc = await connectBroker({ servers: s.url, creds });
    // Within the remote signer's own deadline (it re-sends every 2 s).
    await mintWith(signer(), newIdentity(), "agent", {
      principal: { owner: "local", actor: "a2" },
      lifecycleUid: newLifecycleUid(),
    });
    assert.doesNotMatch(daemon.stderr(), /made its rail's stream/);

    // A broker that comes back without it (its store lost): the signer makes it again.
    await nc.close();
    const storeDir = s.broker.storeDir;
    await s.killBroker();
    const found: string[] = [];
    for await (const e of walk(storeDir)) {
      if (e.name === signRailStream(s.space)) found.push(e.path);
    }
    assert.equal(found.length, 1, "the rail's stream dir was not found in the broker's store");
    await Deno.remove(found[0], { recursive: true });
    await s.startBroker();
    await daemon.waitForLine(/made its rail's stream \S+ again/, 30_000);
    nc = await connectBroker({ servers: s.url, creds });
    await mintWith(signer(), newIdentity(), "agent", {
      principal: { owner: "local", actor: "a3" },
      lifecycleUid: newLifecycleUid(),
    });
  } finally {
    await nc.close().catch(() => {});
    daemon.child.kill("SIGTERM");
    await daemon.child.status;
  }
});
