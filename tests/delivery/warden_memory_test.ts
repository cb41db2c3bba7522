/**
 * Red team 12's attack on the storage warden's memory, kept as a test: four colluders DM each
 * other genuine messages whose ids are ~60 KB, wait for the warden to read them, read them all
 * themselves, and again, keeping DM far under half full. The warden first remembered every id it
 * read for as long as its pair existed and forgot read messages only when it trimmed: the daemon
 * grew ~140 MiB a cycle (70 MiB to 1.4 GiB in fourteen). What it remembers must follow what the
 * stream holds, not the traffic the space ever carried.
 */
import assert from "node:assert/strict";
import { dmDurableName, streamNames, subjectRoot } from "../../lib/wire/mod.ts";
import { type Agent, connectAs, startDaemonProcess, startDeliverySpace } from "./_helpers.ts";

const ENC = new TextEncoder();
const CYCLES = 5;

function rssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

Deno.test("delivery - DMs with 60 KB ids, read as fast as they come, do not grow the warden's memory with the traffic", async () => {
  await using s = await startDeliverySpace({ prefix: "wardenmem" });
  const daemon = startDaemonProcess(s);
  const P = subjectRoot(s.space);
  const names = streamNames(s.space);
  const agents: Agent[] = [];
  for (let i = 0; i < 4; i++) agents.push(await s.agent(`c${i}`));
  const conns = await Promise.all(agents.map((c) => connectAs(s.url, c.creds)));
  try {
    await daemon.waitForLine(/delivery daemon up/);
    await new Promise((r) => setTimeout(r, 2_000));
    const before = rssMiB(daemon.child.pid);
    let n = 0;
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      await Promise.all(agents.map(async (from, i) => {
        const js = conns[i].jetstream();
        let inFlight: Promise<unknown>[] = [];
        for (const to of agents) {
          if (to === from) continue;
          for (let k = 0; k < 200; k++) {
            const id = `${crypto.randomUUID()}-${"i".repeat(60_000)}`;
            const body = { id, ts: Date.now(), space: s.space, from: { id: from.id }, parts: [] };
            inFlight.push(
              js.publish(
                `${P}.inst.local.${to.name}.local.${from.name}`,
                ENC.encode(JSON.stringify({
                  ...body,
                  parts: [{ kind: "text", text: `m${n++}` }],
                })),
              ).catch(() => {}),
            );
            if (inFlight.length >= 32) {
              await Promise.all(inFlight);
              inFlight = [];
            }
          }
        }
        await Promise.all(inFlight);
      }));
      // The warden reads them; then their recipients read them all.
      await new Promise((r) => setTimeout(r, 4_000));
      await Promise.all(agents.map(async (c, i) => {
        const durable = dmDurableName(c.principal, c.uid);
        const cons = await conns[i].jetstream().consumers.get(names.dm, durable);
        for (let got = 1; got > 0;) {
          got = 0;
          for await (const m of await cons.fetch({ max_messages: 256, expires: 1000 })) {
            got++;
            m.ack();
          }
        }
      }));
    }
    await new Promise((r) => setTimeout(r, 1_500));
    const growth = rssMiB(daemon.child.pid) - before;
    // Remembering them would be ~140 MiB a cycle; what is left is the heap's own slack.
    assert.ok(growth < 200, `the daemon grew ${growth.toFixed(0)} MiB over ${n} DMs all read`);
  } finally {
    for (const nc of conns) await nc.close();
    daemon.kill();
    await daemon.exited;
  }
});
