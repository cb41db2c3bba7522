/**
 * Red team 20a: the delivery daemon's membership feed writes one row per principal into
 * `cotal_membership_<s>`, listing every `chat.*.*.<channel>` pattern its live connections
 * subscribe to, with no cap on the row. An agent spawned with a wildcard subscribe grant
 * (`--allow-subscribe '>'`) subscribes to 300 made-up channels with 4 KiB names (well inside its
 * 1000 subscriptions): its row is over the broker's 1 MiB payload, the feed's put throws, and
 * every sweep stopped there, so nobody else's row was written any more. The test asserts the
 * defence holds: a member that subscribes after the attack still gets its row, and mallory's
 * row lists only what fits the frozen row cap, marked truncated.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { waitFor } from "../_harness/broker.ts";
import { FEED_MAX_ROW_BYTES } from "../../lib/delivery/feed_rows.ts";
import { bindKv } from "../../lib/wire/mod.ts";
import { bucketNames } from "../../lib/wire/resources.ts";
import { subjectRoot } from "../../lib/wire/subjects.ts";
import { connectAs, startDaemonProcess, startDeliverySpace } from "../delivery/_helpers.ts";

Deno.test("redteam20a - one member's oversized membership row does not stop the membership feed for everyone", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20amship" });
  const daemon = startDaemonProcess(s);
  const P = subjectRoot(s.space);
  const conns: NatsConnection[] = [];
  try {
    await daemon.waitForLine(/membership feed up/, 40_000);
    const admin = await connectAs(s.url, await s.mint("admin"));
    conns.push(admin);
    const kv = await bindKv(admin, bucketNames(s.space).membership);
    const rowOf = async (k: string) => {
      const e = await kv.get(k).catch(() => null);
      if (!e || e.operation !== "PUT") return undefined;
      return JSON.parse(new TextDecoder().decode(e.value)) as { live: string[] };
    };
    // Alice is live on general and has her row.
    const alice = await s.agent("alice");
    const an = await connectAs(s.url, alice.creds);
    conns.push(an);
    an.subscribe(`${P}.chat.*.*.general`);
    await an.flush();
    await waitFor(async () => (await rowOf("local.alice"))?.live.includes("general") ?? false, {
      what: "alice's membership row",
      timeoutMs: 30_000,
    });

    // Mallory: a wildcard subscribe grant, 300 channels with 4 KiB names on one connection.
    const mallory = await s.agent("mallory", { allowSubscribe: [">"] });
    const mn = await connectAs(s.url, mallory.creds);
    conns.push(mn);
    const long = "x".repeat(4000);
    for (let i = 0; i < 300; i++) mn.subscribe(`${P}.chat.*.*.c${i}-${long}`);
    await mn.flush();
    await new Promise((r) => setTimeout(r, 3000));

    // Bob joins general afterwards: his row must appear, and alice's must go once she leaves.
    const bob = await s.agent("bob");
    const bn = await connectAs(s.url, bob.creds);
    conns.push(bn);
    bn.subscribe(`${P}.chat.*.*.general`);
    await bn.flush();
    await an.close();
    const seen = await waitFor(
      async () =>
        (await rowOf("local.bob"))?.live.includes("general") === true &&
        (await rowOf("local.alice")) === undefined,
      { what: "bob's row and alice's removal", timeoutMs: 40_000 },
    ).then(() => "ok", (e) => (e as Error).message);
    const warn = daemon.stderr().split("\n").filter((l) => /membership feed/.test(l)).slice(-3);
    console.log("daemon feed lines:\n" + warn.join("\n"));
    const m = await kv.get("local.mallory");
    assert.ok(m && m.value.length <= FEED_MAX_ROW_BYTES + 1024, "mallory's row is bounded");
    const mr = JSON.parse(new TextDecoder().decode(m.value));
    assert.equal(mr.truncated, true);
    assert.ok(mr.live.length > 0 && mr.live.length < 300);
    assert.equal(
      seen,
      "ok",
      `the membership view stopped after mallory's row: bob=${
        JSON.stringify(await rowOf("local.bob"))
      } alice=${JSON.stringify(await rowOf("local.alice"))}`,
    );
  } finally {
    for (const c of conns) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
