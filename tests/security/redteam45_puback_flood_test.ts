/**
 * Red team 45: a member (an ordinary agent cred, straight to the broker) floods the signer's
 * rail stream with broker answers. It writes its own presence key as fast as it can, each put
 * with the reply subject set to `<root>.sign.req.local.<supervisor>.<n>`: the presence bucket's
 * publish ack (a few dozen bytes of JSON, no proof) is stored in the rail stream, which keeps at
 * most 4,096 messages and drops the oldest. An honest request sits behind the flood; if the
 * flood outruns the signer's pull, the honest request is dropped before it is read.
 *
 * Result when written: FINDING. Three connections put ~177,000 answers a second; the stream sat
 * at 4,096 messages with the signer's durable ~4,096 behind for the whole flood, and the honest
 * supervisor got one answer in 15 s (its next request timed out, signer_unreachable, after all
 * five of its re-sends were dropped). Right after the flood it is answered at once.
 *
 * Fixed (`lib/trust/sign_rail_token.ts`): the rail's subjects carry a token only the space's
 * signing key computes, so the member aims at subjects it can name (the token-less form, or a
 * token it made up), which no stream stores and no one reads.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { spaceNames } from "../../lib/trust/grant_names.ts";
import { connectAs } from "../delivery/_helpers.ts";
import { guessed, honestLoop, honestMint, railState, startRt45 } from "./_rt45.ts";

const TE = new TextEncoder();

/** Puts on `agent`'s own presence key, answers aimed at the rail, for `ms`. */
async function pubAckFlood(
  conns: NatsConnection[],
  space: string,
  actor: string,
  ms: number,
  body: Uint8Array,
): Promise<number> {
  const n = spaceNames(space);
  const key = `$KV.${n.buckets.presence}.local.${actor}`;
  const end = Date.now() + ms;
  let sent = 0;
  await Promise.all(conns.map(async (c) => {
    while (Date.now() < end) {
      for (let i = 0; i < 500; i++) {
        c.publish(key, body, {
          reply: guessed(n.root, "req", sent++),
        });
      }
      await c.flush();
    }
  }));
  return sent;
}

Deno.test("redteam45 (found, fixed) - a member's presence-put answers aimed at the signer rail do not keep an honest supervisor from being signed", async () => {
  const st = await startRt45("rt45pa", 10_000);
  const agent = await st.s.agent("floody");
  // One connection is enough to outrun the signer (three measured: ~177,000 answers a second).
  const conns = await Promise.all([0].map(() => connectAs(st.s.url, agent.creds)));
  try {
    assert.equal(await honestMint(st.signer), undefined, "honest request before the flood");
    let flooding = true;
    const loop = honestLoop(st.signer, () => flooding);
    const states: string[] = [];
    const watch = (async () => {
      while (flooding) {
        await new Promise((r) => setTimeout(r, 1_000));
        const r = await railState(st.inspectNc, st.s.space).catch((e) => String(e));
        states.push(JSON.stringify(r));
      }
    })();
    const sent = await pubAckFlood(conns, st.s.space, agent.name, 15_000, TE.encode("{}"));
    flooding = false;
    await loop.done;
    await watch;
    console.log(`flood: ${sent} puts in 15 s; honest ${JSON.stringify(loop.tally)}`);
    console.log(states.join("\n"));
    const after = Date.now();
    assert.equal(await honestMint(st.signer), undefined, "honest request after the flood");
    console.log(`after the flood, answered in ${Date.now() - after} ms`);
    assert.doesNotMatch(st.daemon.stderr(), /lost its broker connection/);
    assert.equal(loop.tally.failed, 0, `honest requests failed: ${JSON.stringify(loop.tally)}`);
  } finally {
    for (const c of conns) await c.close().catch(() => {});
    await st.close();
  }
});
