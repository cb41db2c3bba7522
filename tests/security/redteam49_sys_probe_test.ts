/**
 * Red team 49 (promise 1): the relay presents the agent's bearer in its CONNECT, so the broker
 * holds it (and the callout-minted user JWT) for the connection. A hostile agent asks the
 * broker about itself and its account over the system imports every account gets
 * (`$SYS.REQ.USER.INFO`, the account-scoped CONNZ with `auth`, STATZ, SUBSZ), hoping for a bearer,
 * a token, or another agent's connection names (their inbox ids). Nothing it is answered may
 * carry a bearer or name the victim's inbox.
 */
import assert from "node:assert/strict";
import { startRt49 } from "./_rt49.ts";

Deno.test("redteam49 - the broker's system requests tell an agent no bearer and no other agent's inbox", async () => {
  const t = await startRt49();
  try {
    const victim = await t.manager.spawn({
      agent: "task-runner",
      name: "victim",
      role: "shout",
      command: "/bin/sh",
      args: ["-c", "tr a-z A-Z"],
    });
    const asks: [string, string][] = [
      ["$SYS.REQ.USER.INFO", ""],
      ["$SYS.REQ.ACCOUNT.PING.CONNZ", JSON.stringify({ auth: true, subscriptions_detail: true })],
      ["$SYS.REQ.ACCOUNT.PING.STATZ", JSON.stringify({ include_unused: true })],
      ["$SYS.REQ.SERVER.PING.CONNZ", JSON.stringify({ auth: true })],
      ["$SYS.REQ.ACCOUNT.PING.SUBSZ", "{}"],
    ];
    await t.hostile("nosy", [["ask", JSON.stringify(asks)]]);
    const lines = await t.done("nosy", 60_000).catch(async (e) => {
      console.log("client stderr:", await Deno.readTextFile(`${t.work}/nosy.err`).catch(() => ""));
      console.log("client out:", JSON.stringify(await t.lines("nosy")).slice(0, 2000));
      throw e;
    });
    const text = JSON.stringify(lines);
    console.log(text.slice(0, 3000));
    assert.equal((lines[0] as { first?: string }).first, "PONG", "the probe got in");
    const victimLaunch = [...text.matchAll(/_INBOX_([A-Z0-9]{56})/g)].map((m) => m[1]);
    const own = (lines[0] as { own?: string }).own;
    const others = victimLaunch.filter((id) => id !== own);
    // A bearer is a JWS (three base64url parts); a callout user JWT too. Neither may be told.
    assert.ok(
      !/eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{20,}/.test(text),
      "a JWT was told",
    );
    assert.deepEqual(others, [], `another connection's inbox was told (victim ${victim.id})`);
  } finally {
    await t.close();
  }
});
