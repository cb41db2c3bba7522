/**
 * Red team 46: a compromised supervisor knows the rail's token (its own grants carry it) and may
 * ask the signer for a provisioner cred, which may update the space's CHAT stream. It updates
 * CHAT to also take the rail's request subjects, to pull honest requests into a stream the signer
 * never reads. The test asserts the defence holds: the broker refuses the overlapping update and
 * the honest supervisor is still signed.
 */
import assert from "node:assert/strict";
import { connectBroker } from "../../lib/wire/connect.ts";
import { signRail, spaceNames } from "../../lib/trust/grant_names.ts";
import { signRailTokenFor } from "../../lib/trust/mod.ts";
import { honestMint, startRt45 } from "./_rt45.ts";

Deno.test("redteam46 - a provisioner cannot move the rail's request subjects into CHAT", async () => {
  const st = await startRt45("rt46po", 5_000);
  try {
    const n = spaceNames(st.s.space);
    const token = await signRailTokenFor(st.s.auth);
    const nc = await connectBroker({ servers: st.s.url, creds: await st.s.mint("provisioner") });
    try {
      const jsm = await nc.jetstreamManager();
      const chat = (await jsm.streams.info(n.streams.chat)).config;
      const taken = await jsm.streams.update(n.streams.chat, {
        ...chat,
        subjects: [...chat.subjects, signRail.request(n.root, token, "*", "*", "*")],
      }).then(() => "updated", (e) => String((e as Error).message));
      console.log(`CHAT update: ${taken}`);
      assert.notEqual(taken, "updated");
    } finally {
      await nc.close();
    }
    assert.equal(await honestMint(st.signer), undefined);
  } finally {
    await st.close();
  }
});
