/**
 * A program agent in any language reaches the mesh by one command: its runner puts `cotal-mcp`
 * (`cotal mcp` as this agent, from its launch file) on the program's PATH and names it in
 * `COTAL_MCP`. Here a shell script, spawned by the real supervisor into the real sandbox,
 * speaks MCP to it by hand and posts to a channel; the post is judged on the broker.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { removeTempDir, waitFor } from "../_harness/broker.ts";
import { agentWorkdir } from "./_agent_fixture.ts";
import { startManagerMesh, startMeshDelivery } from "./_manager_mesh.ts";
import { connectBroker, subjectRoot } from "../../lib/wire/mod.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";

const rpc = (v: unknown) => JSON.stringify({ jsonrpc: "2.0", ...v as object });

Deno.test("manager - a program agent's script posts to a channel through cotal-mcp on its PATH", async () => {
  await using mesh = await startManagerMesh("progmcp");
  const work = await agentWorkdir("cotal-progmcp-");
  let stopDelivery = () => Promise.resolve();
  let closeObserver = () => Promise.resolve();
  try {
    // The space's delivery daemon, as cotal up runs it: it answers the agents' channel joins.
    stopDelivery = await startMeshDelivery(mesh);
    const obs = await connectBroker({
      servers: [mesh.url],
      creds: await mintCreds(mesh.auth, newIdentity(), "observer"),
    });
    closeObserver = () => obs.close();
    const seen: string[] = [];
    obs.subscribe(`${subjectRoot(mesh.space)}.chat.>`, {
      callback: (_e, m) => seen.push(new TextDecoder().decode(m.data)),
    });
    await obs.flush();
    await mesh.manager({ runtime: "pty" });
    const ctl = await mesh.control();
    const lines = [
      rpc({
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "sh", version: "0" },
        },
      }),
      rpc({ method: "notifications/initialized" }),
      rpc({
        id: 2,
        method: "tools/call",
        params: { name: "post", arguments: { channel: "general", text: "hello from a script" } },
      }),
    ];
    const script = [
      `[ "$COTAL_MCP" = "$(command -v cotal-mcp)" ] && echo same > '${work}/found'`,
      `(printf '%s\\n' ${
        lines.map((l) => `'${l}'`).join(" ")
      }; sleep 30) | cotal-mcp > '${work}/out.jsonl'`,
    ].join("\n");
    const row = await ctl.request<AgentRow>("spawn", {
      agent: "program",
      name: "scripted",
      command: "/bin/sh",
      args: ["-c", script],
      workdir: work,
      subscribe: ["general"],
      allowSubscribe: ["general"],
      allowPublish: ["general"],
    }, { timeoutMs: 60_000 });
    assert.equal(row.status, "running");
    let answer: { result?: { content?: { text?: string }[]; isError?: boolean } } | undefined;
    await waitFor(async () => {
      const out = await Deno.readTextFile(`${work}/out.jsonl`).catch(() => "");
      answer = out.split("\n").filter(Boolean).map((l) => JSON.parse(l)).find((m) => m.id === 2);
      return answer !== undefined;
    }, { timeoutMs: 90_000, what: "the post's answer from cotal-mcp" });
    assert.equal((await Deno.readTextFile(`${work}/found`)).trim(), "same");
    assert.notEqual(answer!.result?.isError, true, JSON.stringify(answer));
    // On the broker: an observer of the space's channels saw the post, from the agent.
    await waitFor(() => seen.some((m) => m.includes("hello from a script")), {
      what: "the post on the broker",
    });
    const post = JSON.parse(seen.find((m) => m.includes("hello from a script"))!);
    assert.equal(post.from?.id, "local.scripted", JSON.stringify(post));
    await ctl.request("despawn", { name: "scripted" });
  } finally {
    await closeObserver();
    await stopDelivery();
    await removeTempDir(work);
  }
});
