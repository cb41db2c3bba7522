/**
 * Two AI agents in the real sandbox, spawned by the real supervisor as `claude-code` agents,
 * talk through `cotal mcp` driven by the MCP SDK's own client (a stand-in in Claude Code's place,
 * `_sdk_harness.ts`): a channel post, a DM, a task and its reply, all through each agent's relay.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { removeTempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh, startMeshDelivery } from "../manager/_manager_mesh.ts";
import { CONFIG } from "./_mcp_agent.ts";
import { SDK_HARNESS } from "./_sdk_harness.ts";

Deno.test("mcp - two agents in the real sandbox converse through cotal mcp and the SDK client: a post, a DM, a task and its reply", async () => {
  await using mesh = await startManagerMesh("mcpsandbox");
  const work = await agentWorkdir("cotal-mcpsandbox-");
  let stopDelivery = () => Promise.resolve();
  try {
    await Deno.writeTextFile(`${work}/harness.ts`, SDK_HARNESS);
    // Claude Code is one executable; the stand-in is a script, run with this Deno.
    await Deno.writeTextFile(
      `${work}/claude`,
      `#!/bin/sh\nexec '${Deno.execPath()}' run -A --config='${CONFIG}' '${work}/harness.ts' "$@"\n`,
    );
    await Deno.chmod(`${work}/claude`, 0o755);
    await Deno.chmod(`${work}/harness.ts`, 0o644);
    // The space's delivery daemon, as cotal up runs it: it answers the agents' channel joins.
    stopDelivery = await startMeshDelivery(mesh);
    await mesh.manager();
    const ctl = await mesh.control();
    const spawn = (name: string, role: string) =>
      ctl.request<AgentRow>("spawn", {
        agent: "claude-code",
        name,
        role,
        command: `${work}/claude`,
        args: [name, `${work}/${name}.json`],
        workdir: work,
        subscribe: ["general"],
        allowSubscribe: ["general"],
        allowPublish: ["general"],
      }, { timeoutMs: 60_000 });
    assert.equal((await spawn("bob", "reviewer")).present, true);
    assert.equal((await spawn("alice", "writer")).present, true);
    for (const who of ["alice", "bob"]) {
      await waitFor(() => jsonFileReady(`${work}/${who}.json`), {
        timeoutMs: 150_000,
        what: `${who}'s record`,
      });
    }
    const alice = JSON.parse(await Deno.readTextFile(`${work}/alice.json`));
    const bob = JSON.parse(await Deno.readTextFile(`${work}/bob.json`));
    assert.equal(alice.error, undefined, JSON.stringify(alice).slice(0, 3000));
    assert.equal(bob.error, undefined, JSON.stringify(bob).slice(0, 3000));
    // Each joined the channel it was spawned into (its launch material names it).
    assert.deepEqual([alice.joined, bob.joined], [["general"], ["general"]]);
    const from = (m: { from: string }) => m.from;
    assert.deepEqual(
      bob.got.map((m: { kind: string; text: string }) => `${m.kind}:${m.text}`).sort(),
      ["channel:hello, all", "dm:psst, bob", "task:review #42"],
    );
    assert.ok(
      bob.got.every((m: { from: string }) => from(m) === "local.alice"),
      JSON.stringify(bob.got),
    );
    assert.equal(alice.reply, "looks good: review #42");
  } finally {
    await stopDelivery();
    await removeTempDir(work);
  }
});
