/**
 * Red team 45: the signer's answers ride a core subscription of the supervisor,
 * `<root>.sign.reply.<owner>.<actor>.*`, and the broker never checks a reply subject. A member
 * (an ordinary agent cred) writes a 48 KiB row on its own presence key and reads it back with
 * STREAM.MSG.GET as fast as it can, each read's answer (~65 KB of JSON) aimed at the
 * supervisor's reply rail. If the broker pushes those faster than the supervisor reads, it cuts
 * the supervisor as a slow consumer and the signer's answers to it are lost.
 *
 * Result when written: FINDING (of the client side of the rail). Three agent connections made
 * ~200,000 reads in 15 s (~13,000 a second, ~870 MB/s aimed at the supervisor); the broker cut
 * the supervisor's connection 3 times. Its signing survived (779 honest requests, none failed,
 * the slowest 6.2 s: the 2 s re-sends rescued the answers lost in the cuts), but every cut also
 * drops whatever else that connection carries (its control rail, its lease writes).
 *
 * Fixed (`lib/trust/sign_rail_token.ts`): the reply rail carries the rail's token too, so the
 * member's answers land on subjects no one subscribes.
 */
import assert from "node:assert/strict";
import { Events, type NatsConnection } from "nats";
import { spaceNames } from "../../lib/trust/grant_names.ts";
import { connectAs } from "../delivery/_helpers.ts";
import { guessed, honestLoop, startRt45 } from "./_rt45.ts";

const TE = new TextEncoder();

Deno.test("redteam45 (found, fixed) - large broker answers a member aims at the supervisor's reply rail do not cut it or lose its answers", async () => {
  const st = await startRt45("rt45rr", 10_000);
  const agent = await st.s.agent("aimer");
  const conns: NatsConnection[] = await Promise.all(
    [0, 1, 2].map(() => connectAs(st.s.url, agent.creds)),
  );
  let cuts = 0;
  (async () => {
    for await (const s of st.supNc.status()) if (s.type === Events.Disconnect) cuts++;
  })().catch(() => {});
  try {
    const n = spaceNames(st.s.space);
    const stream = `KV_${n.buckets.presence}`;
    const key = `$KV.${n.buckets.presence}.local.${agent.name}`;
    await conns[0].request(key, new Uint8Array(48 * 1024).fill(65), { timeout: 5_000 });
    const get = TE.encode(JSON.stringify({ last_by_subj: key }));
    let flooding = true;
    const loop = honestLoop(st.signer, () => flooding);
    let sent = 0;
    const end = Date.now() + 15_000;
    await Promise.all(conns.map(async (c) => {
      while (Date.now() < end) {
        for (let i = 0; i < 200; i++) {
          c.publish(`$JS.API.STREAM.MSG.GET.${stream}`, get, {
            reply: guessed(n.root, "reply", sent++),
          });
        }
        await c.flush();
      }
    }));
    flooding = false;
    await loop.done;
    console.log(
      `${sent} reads in 15 s; supervisor cut ${cuts} times; honest ${JSON.stringify(loop.tally)}`,
    );
    assert.equal(cuts, 0, "the supervisor's connection was cut");
    assert.equal(loop.tally.failed, 0, `honest requests failed: ${JSON.stringify(loop.tally)}`);
  } finally {
    for (const c of conns) await c.close().catch(() => {});
    await st.close();
  }
});
