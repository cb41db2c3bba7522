/**
 * Red team 45: the rail stream is memory storage, so a broker restart drops it and the signer
 * makes it again once it has reconnected. A compromised supervisor asks the signer for a
 * provisioner cred (its policy allows one, 5 minutes), which may STREAM.UPDATE every message and
 * bucket stream of the space with any config in the body. Right after the broker is back, before
 * the signer has re-made its rail, it updates CHAT to also take `<root>.sign.req.>`: the broker
 * then refuses the rail stream's create (its subjects overlap CHAT's), and CHAT keeps that
 * config on disk after the attacker is gone. Every later signing request is stored in CHAT and
 * no one answers it.
 *
 * Result when written: FINDING. The update won on the first try (the signer reconnects after
 * 250 ms and more); the signer logged "could not open its rail (subjects overlap with an existing
 * stream); retrying" every 10 s, and every honest request for 20 s after the attacker closed its
 * connection timed out (signer_unreachable). It lasts until an operator puts CHAT's subjects back.
 *
 * Fixed (`lib/signer/rail.ts`): the rail's stream is on disk, so it outlives the restart and
 * the broker refuses CHAT's update (its subjects would overlap).
 */
import assert from "node:assert/strict";
import { signRailTokenFor } from "../../lib/trust/mod.ts";
import type { NatsConnection } from "nats";
import { signRail, spaceNames } from "../../lib/trust/grant_names.ts";
import { mintWith, newIdentity } from "../../lib/trust/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { honestMint, startRt45 } from "./_rt45.ts";

Deno.test("redteam45 (found, fixed) - a provisioner cred from the signer cannot squat the rail's subjects across a broker restart and stop signing for good", async () => {
  const st = await startRt45("rt45sq", 4_000);
  let attacker: NatsConnection | undefined;
  try {
    assert.equal(await honestMint(st.signer), undefined, "honest request before");
    // What the compromised supervisor gets from the signer, within its policy.
    const id = newIdentity();
    const provCreds = await mintWith(st.signer, id, "provisioner");
    const n = spaceNames(st.s.space);
    const chat = n.streams.chat;
    // The compromised supervisor's creds carry the rail's token.
    const squat = signRail.request(n.root, await signRailTokenFor(st.s.auth), "*", "*", "*");

    await st.s.killBroker();
    await st.s.startBroker();
    // As soon as the broker takes connections: read CHAT's config, add the rail's subjects.
    const deadline = Date.now() + 10_000;
    let squatted = false;
    let tries = 0;
    while (!squatted && Date.now() < deadline) {
      tries++;
      try {
        attacker ??= await connectBroker({ servers: st.s.url, creds: provCreds });
        const jsm = await attacker.jetstreamManager({ timeout: 2_000 });
        const info = await jsm.streams.info(chat);
        const cfg = { ...info.config, subjects: [...info.config.subjects, squat] };
        await jsm.streams.update(chat, cfg);
        squatted = true;
      } catch {
        await new Promise((r) => setTimeout(r, 5));
      }
    }
    console.log(`squatted=${squatted} after ${tries} tries`);
    await attacker?.close();
    attacker = undefined;
    // The attacker is gone. Give the signer time to come back, then ask for 20 s.
    await new Promise((r) => setTimeout(r, 3_000));
    const outcomes: (string | undefined)[] = [];
    const until = Date.now() + 20_000;
    while (Date.now() < until) outcomes.push(await honestMint(st.signer));
    console.log(`after the attacker left: ${JSON.stringify(outcomes)}`);
    console.log(st.daemon.stderr().split("\n").filter((l) => /rail/.test(l)).slice(-3).join("\n"));
    assert.ok(
      outcomes.some((o) => o === undefined),
      `no honest request was signed in 20 s after the attacker left (squatted=${squatted})`,
    );
  } finally {
    await attacker?.close().catch(() => {});
    await st.close();
  }
});
