/**
 * Red team 28: the parts DMs of redteam28_null_parts_test.ts and redteam28_part_shapes_test.ts,
 * sent by an agent in the default sandbox through its relay (the guard reads a DM's subject,
 * not its body). alice's endpoint accepts each (receive.ts checks only that parts is an array)
 * and `toolMessage` (lib/mcp/tools.ts), which renders every message a model reads, throws on
 * it; in `cotal mcp` such a DM blocks every later inbox/wait of the model (see those tests).
 *
 * Passes when the defence holds: each DM is dropped on receipt, or rendered without throwing.
 */
import assert from "node:assert/strict";
import { toolMessage } from "../../lib/mcp/tools.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";

const NOPRIM = { toString: 0, valueOf: 0 };
const SHAPES: unknown[][] = [[null], [{ kind: NOPRIM }], [{ kind: "text", text: NOPRIM }]];
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

const RAW = `
export async function run(ctx) {
  await ctx.endpoint();
  try { await go(ctx); } catch (e) { await Deno.writeTextFile(ctx.agentDir + "/raw.log", String(e)); }
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
async function go(ctx) {
  const creds = ctx.launch.auth.creds;
  const jwt = /BEGIN NATS USER JWT-+\\s*(\\S+)/.exec(creds)[1];
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: 4222 });
  const enc = new TextEncoder();
  const buf = new Uint8Array(65536);
  await conn.read(buf); // INFO
  await conn.write(enc.encode("CONNECT " + JSON.stringify({
    jwt, sig: "", verbose: false, pedantic: false, headers: true, protocol: 1, name: "raw",
  }) + "\\r\\n"));
  const body = enc.encode(@@BODY@@);
  await conn.write(enc.encode("PUB " + @@SUBJECT@@ + " " + body.length + "\\r\\n"));
  await conn.write(body);
  await conn.write(enc.encode("\\r\\nPING\\r\\n"));
  const n = await conn.read(buf);
  await Deno.writeTextFile(ctx.agentDir + "/raw.log", new TextDecoder().decode(buf.subarray(0, n ?? 0)));
}
`;

Deno.test("redteam28 - a sandboxed agent's DM with an unprintable part is not one a model's view throws on", async () => {
  await using mesh = await startManagerMesh("rt28parts");
  await mesh.manager();
  const ctl = await mesh.control();
  const alice = await mesh.client("alice");
  const errs: string[] = [];
  for (let k = 0; k < SHAPES.length; k++) {
    const id = crypto.randomUUID();
    const msg = {
      id,
      ts: Date.now(),
      space: mesh.space,
      from: { id: `local.mallory${k}`, name: "mallory" },
      to: "local.alice",
      parts: SHAPES[k],
    };
    const subject = `cotal.${mesh.space}.inst.local.alice.local.mallory${k}`;
    const dir = await tempDir("cotal-rt28parts-");
    await Deno.writeTextFile(
      `${dir}/raw.js`,
      RAW.replace("@@BODY@@", JSON.stringify(JSON.stringify(msg)))
        .replace("@@SUBJECT@@", JSON.stringify(subject)),
    );
    const work = await agentWorkdir("cotal-rt28parts-work-");
    const row = await ctl.request<AgentRow>("spawn", {
      agent: "module",
      module: `${dir}/raw.js`,
      name: `mallory${k}`,
      workdir: work,
    }, { timeoutMs: 40_000 });
    assert.equal(row.status, "running");
    const got = await waitFor(() => alice.dms.some((m) => m.id === id), {
      timeoutMs: 15_000,
      what: "mallory's DM",
    }).then(() => true, () => false);
    console.log(
      "mallory's raw connection:",
      await Deno.readTextFile(`${work}/raw.log`).catch(() => "?"),
    );
    if (!got) {
      console.log(`shape ${k}: DM did not arrive (dropped on the way or on receipt): held`);
      continue;
    }
    try {
      console.log(
        "alice's model would see:",
        JSON.stringify(toolMessage(alice.dms.find((m) => m.id === id)!)),
      );
    } catch (e) {
      errs.push(`shape ${JSON.stringify(SHAPES[k])}: ${e}`);
      console.log("toolMessage threw:", String(e));
    }
  }
  assert.deepEqual(errs, [], "rendering mallory's DMs for alice's model throws");
});
