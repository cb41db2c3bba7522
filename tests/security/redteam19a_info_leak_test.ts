/**
 * Red team 19a, attempt A4 (recon for goal 1): the HEAD commit says an agent under
 * `--net host` or `--isolation deno-only` "no longer holds ... the broker's address". Its relay,
 * though, passes the broker's INFO line to it as it comes, and nats-server's INFO names its
 * `host` and `port` (and `connect_urls` in a cluster). An accomplice who later holds real creds
 * (attempt A3) needs exactly that address to connect straight to the broker.
 *
 * Dialled as the accomplice would with nothing but the launch file: the relay's loopback port,
 * read the INFO it sends before any proof. The test asserts the defence HOLDS: the INFO names
 * neither the broker's port nor any of its connect URLs.
 */
import { launchOf, PRESENT_AGENT } from "./_present_agent.ts";
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { readLaunchMaterial } from "../../lib/manager/launch.ts";
import { tempDir } from "../_harness/broker.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

Deno.test("redteam19a A4 - a deno-only agent's relay does not tell it (or anyone dialling it) the broker's address", async () => {
  await using mesh = await startManagerMesh("rt19info");
  await mesh.manager({ isolation: "deno-only" });
  const ctl = await mesh.control();
  const dir = await tempDir("cotal-rt19a-info-");
  await Deno.writeTextFile(`${dir}/agent.js`, PRESENT_AGENT);
  await ctl.request<AgentRow>("spawn", {
    agent: "module",
    module: `${dir}/agent.js`,
    name: "hosted",
    workdir: await agentWorkdir("cotal-rt19a-info-w-"),
    // Under a root supervisor deno-only runs only agents the operator trusts with root.
    trusted: true,
  }, { timeoutMs: 40_000 });
  const material = await readLaunchMaterial(await launchOf(mesh.root, "hosted"));
  const port = Number(new URL(material.servers[0]).port);
  const c = await Deno.connect({ hostname: "127.0.0.1", port });
  const buf = new Uint8Array(65536);
  let text = "";
  const deadline = Date.now() + 5_000;
  while (!/\r\n/.test(text) && Date.now() < deadline) {
    const n = await Promise.race([
      c.read(buf),
      new Promise<null>((r) => setTimeout(() => r(null), 5_000)),
    ]);
    if (n === null) break;
    text += new TextDecoder().decode(buf.subarray(0, n));
  }
  c.close();
  const info = JSON.parse(/^INFO ([^\r\n]*)/.exec(text)?.[1] ?? "{}");
  console.log(
    `INFO through the relay: host=${info.host} port=${info.port} connect_urls=${
      JSON.stringify(info.connect_urls ?? [])
    }; the broker is on ${mesh.broker.port}`,
  );
  assert.notEqual(info.port, mesh.broker.port, "the relay's INFO names the broker's port");
});
