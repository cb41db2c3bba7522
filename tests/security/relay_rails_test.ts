/**
 * The relay's guard lets a sandboxed agent do what its own endpoint does: under `cotal up`
 * (delivery daemon, signer and supervisor running), a module agent joins a durable channel and
 * gets its backstop from the delivery daemon, whose answer comes on the agent's bound reply
 * rail (`<root>.ctl.delivery.<owner>.<actor>.reply.*`), not its inbox (red team 6 noticed that
 * the guard refused this request and cut the agent's connection).
 */
import assert from "node:assert/strict";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { cotalIn, cotalQuietly } from "../_harness/cotal_cli.ts";

const MODULE = `
export async function run(ctx) {
  const ep = await ctx.endpoint();
  const r = await ep.joinChannel("general");
  await Deno.writeTextFile(ctx.agentDir + "/join.json", JSON.stringify(r));
  await new Promise((res) => ctx.signal.addEventListener("abort", res, { once: true }));
}
`;

Deno.test("security - a sandboxed agent's durable join goes through its relay and the daemon answers", async () => {
  const root = await tempDir("cotal-rails-");
  const dir = await tempDir("cotal-rails-mod-");
  const work = await agentWorkdir("cotal-rails-work-");
  await Deno.writeTextFile(`${dir}/joiner.js`, MODULE);
  try {
    const cotal = cotalIn(root);
    await cotal("up", "--detach", "--port", `${freePort()}`);
    await cotal(
      "spawn",
      "--agent",
      "module",
      "--module",
      `${dir}/joiner.js`,
      "--name",
      "joiner",
      "--allow-subscribe",
      "general",
      "--workdir",
      work,
    );
    await waitFor(() => jsonFileReady(`${work}/join.json`), {
      timeoutMs: 40_000,
      what: "the agent's join result",
    });
    const r = JSON.parse(await Deno.readTextFile(`${work}/join.json`));
    assert.equal(r.joined, true, JSON.stringify(r));
    assert.equal(r.durable, true, JSON.stringify(r));
  } finally {
    await cotalQuietly(root, "down");
    await removeTempDir(root).catch(() => {});
  }
});
