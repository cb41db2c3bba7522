/**
 * Red team 23: amplification through the relay's down direction.
 *
 * Attack: the relay budgets what an agent sends (bytes, stored bytes, rewrites, connects) but
 * not what the broker sends back, and it all runs on the supervisor's one thread. A sandboxed
 * agent allowed to read and post `general` opens its 8 relay connections and subscribes the
 * same channel 1,000 times on each (the per-connection cap), then posts 60 KB messages: each
 * post comes back 8,000 times (~480 MB) through the supervisor. It re-dials at once when the
 * broker cuts a connection as a slow consumer. A sibling measures PING/PONG round trips through
 * its own relay; the operator runs `ps`.
 *
 * Observed (2026-12-05): 5.9 GB pushed through the supervisor's relay in 54 s (~110 MB/s, 160
 * slow-consumer cuts and re-dials); supervisor CPU 6-44 %, RSS 110 -> 135 MB; the sibling's worst
 * round trip 16-67 ms before, up to 363 ms during; operator `ps` 6-26 ms; the broker's RSS grew
 * to ~870 MB (the known open "broker memory through connections" item). HELD (degraded, bounded).
 *
 * Passes when the defence holds: the sibling's worst round trip stays under 2 s, `ps` answers
 * within 5 s, and the supervisor is the same process at the end.
 */
import assert from "node:assert/strict";
import { agentDir, cotal, pidOf, psMs, rssKiB, waitUntil } from "./_rt23_stack.ts";

const ROOT = "/tmp/rt23root-am";
const WORK = "/tmp/rt23w-am";

function worstOf(log: string): number[] {
  return log.split("\n").filter(Boolean).map((l) => Number(/worst=(\d+)ms/.exec(l)?.[1] ?? 0));
}

Deno.test({
  name:
    "redteam23 - 8,000 subscriptions on one channel do not starve the supervisor's relays (skipped: held when written; too heavy for the suite: about 6 GB through the supervisor's relays in 50 s)",
  ignore: true,
}, async () => {
  await agentDir(`${WORK}/rtt`, ["rtt.ts"]);
  await agentDir(`${WORK}/amp`, ["amp.ts"]);
  console.log(await cotal(["up", "--root", ROOT, "--port", "46230", "--detach"], 170_000));
  try {
    const sup = await pidOf(`supervise.ts.*${ROOT}`);
    const broker = await pidOf(`nats-server -c ${ROOT}/`);
    assert.ok(sup && broker);
    console.log(
      await cotal([
        "spawn",
        "--root",
        ROOT,
        "--agent",
        "program",
        "--name",
        "sibling",
        "--workdir",
        `${WORK}/rtt`,
        "--",
        "/bin/sh",
        "-c",
        `exec deno run -A ${WORK}/rtt/rtt.ts ${WORK}/rtt/log`,
      ]),
    );
    const rttLog = () => Deno.readTextFile(`${WORK}/rtt/log`).catch(() => "");
    await waitUntil(
      "the sibling's round trips",
      90_000,
      async () => worstOf(await rttLog()).length >= 5,
    );
    const before = worstOf(await rttLog());
    const brokerBefore = await rssKiB(broker!);
    console.log(
      await cotal([
        "spawn",
        "--root",
        ROOT,
        "--agent",
        "program",
        "--name",
        "amp",
        "--workdir",
        `${WORK}/amp`,
        "--subscribe",
        "general",
        "--allow-subscribe",
        "general",
        "--allow-publish",
        "general",
        "--",
        "/bin/sh",
        "-c",
        `exec deno run -A ${WORK}/amp/amp.ts ${WORK}/amp/log 8 1000 60000 10`,
      ]),
    );
    const mark = before.length;
    let psWorst = 0, supRss = 0;
    const end = Date.now() + 50_000;
    while (Date.now() < end) {
      psWorst = Math.max(psWorst, await psMs(ROOT));
      supRss = Math.max(supRss, await rssKiB(sup!));
      await new Promise((r) => setTimeout(r, 3000));
    }
    const during = worstOf(await rttLog()).slice(mark);
    const ampLog = (await Deno.readTextFile(`${WORK}/amp/log`).catch(() =>
      ""
    )).trim().split("\n").pop() ?? "";
    console.log(`sibling worst RTT before: ${before.join(",")} ms`);
    console.log(`sibling worst RTT during: ${during.join(",")} ms`);
    console.log(`attacker: ${ampLog.slice(0, 120)}`);
    console.log(
      `ps worst ${psWorst} ms; supervisor max RSS ${supRss} KiB; broker RSS ${brokerBefore} -> ${await rssKiB(
        broker!,
      )} KiB`,
    );
    assert.equal(await pidOf(`supervise.ts.*${ROOT}`), sup, "the supervisor was restarted");
    assert.ok(during.length >= 5, "the sibling stopped measuring");
    assert.ok(
      Math.max(...during) < 2000,
      `the sibling's round trips reached ${Math.max(...during)} ms`,
    );
    assert.ok(psWorst < 5000, `the operator's ps took ${psWorst} ms`);
  } finally {
    console.log(await cotal(["down", "--root", ROOT], 120_000));
  }
});
