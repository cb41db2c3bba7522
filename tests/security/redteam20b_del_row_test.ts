/**
 * Red team 20b: a stored message aimed, header block and all, at the delivery lease key. A
 * member with its own cred (outside any relay) DMs itself messages carrying `KV-Operation: DEL`
 * (DM stores any header), then pulls them from its own DM durable with the MSG.NEXT request's
 * reply subject set to `$KV.cotal_delivery_<s>.lease.0`: the broker delivers each message
 * there and the lease bucket stores it with its headers. Every reader of the key now sees a
 * *delete*, not a row "no holder wrote": the holder's watch and read find the lease gone, so
 * it disarms (fan-out, reader and rails stopped) and re-acquires, once per aimed message.
 *
 * The defence holds when an aimed row is treated as nobody's (as a JSON answer is: written
 * back without going quiet): the daemon never disarms for it.
 */
import assert from "node:assert/strict";
import { headers } from "nats";
import { bucketNames, dmDurableName, instSubject, streamNames } from "../../lib/wire/mod.ts";
import { connectAs, startDaemonProcess, startDeliverySpace } from "../delivery/_helpers.ts";

Deno.test("redteam20b - a stored DM with a KV-Operation: DEL header aimed at lease.0 does not make the daemon go quiet", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20bdel" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const mn = await connectAs(s.url, mallory.creds);
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    const js = mn.jetstream();
    const h = headers();
    h.set("KV-Operation", "DEL");
    for (let i = 0; i < 20; i++) {
      await js.publish(
        instSubject(s.space, mallory.principal, mallory.principal),
        new Uint8Array(),
        {
          headers: h,
        },
      );
    }
    const next = `$JS.API.CONSUMER.MSG.NEXT.${streamNames(s.space).dm}.${
      dmDurableName(mallory.principal, mallory.uid)
    }`;
    const target = `$KV.${bucketNames(s.space).delivery}.lease.0`;
    for (let i = 0; i < 20; i++) {
      mn.publish(next, new TextEncoder().encode(JSON.stringify({ batch: 1, no_wait: true })), {
        reply: target,
      });
      await mn.flush();
      await new Promise((r) => setTimeout(r, 300));
    }
    await new Promise((r) => setTimeout(r, 2_000));
    const log = daemon.stderr();
    const quiet = (log.match(/lease row vanished/g) ?? []).length;
    console.log(log.split("\n").slice(-8).join("\n"));
    assert.equal(quiet, 0, `the daemon disarmed ${quiet} times for aimed rows:\n${log}`);
  } finally {
    await mn.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
