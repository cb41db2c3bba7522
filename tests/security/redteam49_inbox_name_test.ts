/**
 * Red team 49 (promise 2): in user mode the callout grants a connection the inbox its CONNECT
 * names (`_INBOX_<name>.>`), and the agent's relay writes that name. A hostile agent tries to
 * name its connection after another agent's inbox id (plainly, in another spelling, beside
 * forged auth fields) and then subscribes to that agent's inbox, where its replies (JetStream
 * answers, bound-rail replies, request results) arrive. A sound relay keeps the agent's own
 * inbox: every subscription to the victim's inbox is refused.
 */
import assert from "node:assert/strict";
import { decodeJwtUnverified, parseRelayedCreds } from "../../lib/nats/mod.ts";
import { startRt49 } from "./_rt49.ts";

async function launchOf(root: string, name: string): Promise<Record<string, unknown>> {
  const found: string[] = [];
  const walk = async (d: string) => {
    for await (const e of Deno.readDir(d)) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory) await walk(p);
      else if (e.name === "launch.json" && p.includes(`/${name}/`)) found.push(p);
    }
  };
  await walk(`${root}/agents`).catch(() => {});
  assert.ok(found[0], `no launch file for ${name}`);
  return JSON.parse(await Deno.readTextFile(found[0]));
}

Deno.test("redteam49 - an agent that names its connection after another agent's inbox cannot subscribe to that inbox", async () => {
  const t = await startRt49();
  try {
    await t.manager.spawn({
      agent: "program",
      name: "victim",
      command: "/bin/sh",
      args: ["-c", "sleep 300"],
    });
    const launch = await launchOf(t.mesh.root, "victim");
    const creds = (launch.auth as { creds: string }).creds;
    const victimId = decodeJwtUnverified(parseRelayedCreds(creds).jwt).sub as string;
    const sub = [`SUB _INBOX_${victimId}.> 1`, `SUB _INBOX_${victimId}.x 2`];
    const attempts: Record<string, unknown>[] = [
      { name: victimId },
      { Name: victimId },
      { name: victimId, auth_token: "", user: "manager", pass: "x", nkey: victimId },
      { name: "x", "name ": victimId },
      { name: victimId, jwt: undefined },
    ];
    await t.hostile(
      "mallory",
      attempts.map((a) => ["connect", JSON.stringify(a), JSON.stringify(sub)]),
    );
    const lines = await t.done("mallory", 120_000, attempts.length);
    console.log(JSON.stringify(lines, null, 1).slice(0, 4000));
    const firsts = lines.filter((l) => "first" in l);
    assert.equal(firsts.length, attempts.length);
    // Every connection that got in saw both subscriptions refused.
    for (const l of lines.filter((l) => "seen" in l)) {
      const seen = (l.seen as string[]).join("\n");
      const refused = seen.match(/Permissions Violation for Subscription/g)?.length ?? 0;
      assert.equal(refused, 2, `a subscription to the victim's inbox was not refused: ${seen}`);
    }
  } finally {
    await t.close();
  }
});
