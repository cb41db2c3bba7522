/**
 * Red team 46: every presence watcher (the supervisor's own endpoint, lib/manager/manager_broker.ts
 * `startSupervisorEndpoint`, on its supervisor cred) holds a consumer-less core subscription of
 * `$KV.<presence>.>` (lib/trust/grant_names.ts `kvWatch`), and every member may publish on its own
 * presence key. Red team 20a flooded with 60 KiB rows (held). Here a member with its own agent cred
 * publishes rows of the broker's max_payload (~1 MiB) on its own key from 8 connections for 15 s:
 * the stream refuses rows over its cap, but the broker still copies each to every core subscriber.
 *
 * Result when written: FINDING. ~8,400 rows (8.4 GiB) in 15 s; a supervisor-cred connection
 * watching presence (as the supervisor's endpoint does) was cut as a slow consumer 3+ times, and
 * signing requests sent on that same connection (3 of 4) timed out while it was down. The real
 * manager signs on a separate connection (lib/manager/manager.ts `#nc`), so its signing survives;
 * its endpoint (the roster that tells it an agent is ready) does not. Root cause: the presence
 * watch is a core wildcard subscription any member can publish into at max_payload size; the
 * bucket's max_msg_size caps only what is stored, not what is copied to watchers.
 *
 * Fixed (`MEMBER_MAX_PAYLOAD_BYTES`, lib/trust/mint.ts): a member's cred may publish at most
 * 128 KiB a message, so the broker closes the connection that sends a 1 MiB row before any
 * watcher gets it. Rows of 128 KiB at a higher byte rate (13.7 GiB in 15 s) cut no watcher.
 */
import assert from "node:assert/strict";
import { Events, type NatsConnection } from "nats";
import { bucketNames } from "../../lib/wire/resources.ts";
import { connectAs } from "../delivery/_helpers.ts";
import { honestLoop, honestMint, startRt45 } from "./_rt45.ts";

Deno.test("redteam46 (found, fixed) - a member's oversize presence rows do not cut the supervisor's signing connection", async () => {
  const st = await startRt45("rt46pc", 5_000);
  const conns: NatsConnection[] = [];
  let stop = false;
  try {
    const presence = bucketNames(st.s.space).presence;
    // A supervisor-cred connection watches presence, as the manager's endpoint does (here the
    // same connection also asks the signer).
    let seen = 0;
    st.supNc.subscribe(`$KV.${presence}.>`, { callback: () => seen++ });
    const cuts: string[] = [];
    (async () => {
      for await (const s of st.supNc.status()) {
        if (s.type === Events.Disconnect || s.type === Events.Error) cuts.push(String(s.data));
      }
    })().catch(() => {});
    assert.equal(await honestMint(st.signer), undefined, "honest request before");
    const mallory = await st.s.agent("mallory");
    const key = `$KV.${presence}.local.mallory`;
    const max = st.supNc.info?.max_payload ?? 1024 * 1024;
    const row = new Uint8Array(Math.max(max, 1024 * 1024) - 4096).fill(0x61);
    for (let i = 0; i < 8; i++) conns.push(await connectAs(st.s.url, mallory.creds));
    let sent = 0;
    // A hostile client ignores the cap the broker's INFO names (npm:nats would refuse the
    // publish itself). The broker closes a connection that publishes past its cred's payload
    // cap; the attacker connects again and goes on.
    const hostile = (c: NatsConnection) => {
      (c.info as { max_payload: number }).max_payload = 1024 * 1024;
      return c;
    };
    conns.forEach(hostile);
    let closedByBroker = 0;
    const floods = conns.map(async (_, i) => {
      while (!stop) {
        try {
          for (let j = 0; j < 20; j++) conns[i].publish(key, row);
          sent += 20;
          // A flush the broker's close leaves pending would wait for the reconnect.
          await Promise.race([
            conns[i].flush(),
            new Promise((_, no) => setTimeout(() => no(new Error("flush timed out")), 2_000)),
          ]);
        } catch {
          closedByBroker++;
          await conns[i].close().catch(() => {});
          if (!stop) {
            conns[i] = await connectAs(st.s.url, mallory.creds).then(hostile, () => conns[i]);
          }
          await new Promise((r) => setTimeout(r, 10));
        }
      }
    });
    const loop = honestLoop(st.signer, () => !stop);
    await new Promise((r) => setTimeout(r, 15_000));
    stop = true;
    await Promise.all(floods);
    await loop.done;
    const after = await honestMint(st.signer);
    console.log(
      `mallory sent ${sent} rows (${
        (sent * row.length / 2 ** 20).toFixed(0)
      } MiB), supervisor saw ${seen}; ` +
        `honest during: ${JSON.stringify(loop.tally)}; cuts: ${
          cuts.slice(0, 3).join(" | ") || "none"
        }; after: ${after ?? "ok"}`,
    );
    assert.deepEqual(cuts, []);
    assert.equal(after, undefined);
    assert.ok(closedByBroker > 0, "the broker took 1 MiB rows from a member's cred");
    assert.equal(seen, 0, "a 1 MiB row reached the supervisor's presence watch");
  } finally {
    stop = true;
    for (const c of conns) await c.close().catch(() => {});
    await st.close();
  }
});
