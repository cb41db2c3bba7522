/**
 * Red team 28, second shape: a part is not only null. A part whose `kind` or `text` is a JSON
 * object with non-callable `toString`/`valueOf` (`{"toString":0,"valueOf":0}`) throws
 * "Cannot convert object to primitive value" wherever a reader turns it into a string
 * (lib/mcp/tools.ts `partText` template / `join`, lib/mesh/ops.ts tail, lib/mesh/join.ts), so a
 * fix that only skips null parts still leaves alice's `cotal mcp` inbox blocked for good.
 * Passes when the defence holds: after the poison, a later genuine DM reaches each model.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { connect, credsAuthenticator } from "nats";
import { denoDir } from "../../lib/manager/start_runner.ts";
import { MCP_V8_FLAGS } from "../../lib/manager/mcp_command.ts";
import { rt28Port } from "./rt28_fixtures/port.ts";
import { cotal } from "./rt28_fixtures/cotal.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const COTAL = `${CHECKOUT}/cmd/cotal.ts`;
const CONFIG = `${CHECKOUT}/deno.json`;

const NOPRIM = { toString: 0, valueOf: 0 };
const SHAPES: Record<string, unknown[]> = {
  alice: [{ kind: NOPRIM }],
  bob: [{ kind: "text", text: NOPRIM }],
};

Deno.test("redteam28 - a part whose kind or text cannot be made a string cannot block a model's inbox", async () => {
  const root = "/tmp/cotal-rt28-shapes";
  await Deno.remove(root, { recursive: true }).catch(() => {});
  const port = rt28Port();
  const url = `nats://127.0.0.1:${port}`;
  const up = await cotal(["up", "--root", root, "--port", String(port), "--detach"], 170_000);
  assert.equal(up.code, 0, up.stderr);
  const clients: Client[] = [];
  try {
    const mint = async (actor: string) => {
      const r = await cotal([
        ...["mint", "--root", root, "--profile", "agent", "--provision"],
        ...["--actor", actor, "--out", `${root}/${actor}.creds`, "--json"],
      ]);
      assert.equal(r.code, 0, r.stderr);
      return JSON.parse(r.stdout) as { lifecycleUid: string; inboxPrefix: string };
    };
    const mallory = await mint("mallory");
    const failures: string[] = [];
    for (const [victim, parts] of Object.entries(SHAPES)) {
      const v = await mint(victim);
      const transport = new StdioClientTransport({
        command: Deno.execPath(),
        args: [
          ...["run", "-A", `--v8-flags=${MCP_V8_FLAGS.join(",")}`, `--config=${CONFIG}`, COTAL],
          ...["mcp", "--creds", `${root}/${victim}.creds`, "--space", "default"],
          ...[
            "--lifecycle-uid",
            v.lifecycleUid,
            "--server",
            url,
            "--inbox",
            `${root}/inbox-${victim}`,
          ],
        ],
        env: { PATH: "/usr/bin:/bin", HOME: `${root}`, DENO_DIR: denoDir() },
        stderr: "pipe",
      });
      const client = new Client({ name: "rt28", version: "1" });
      await client.connect(transport);
      clients.push(client);
      const call = async (name: string, args: Record<string, unknown> = {}) => {
        const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
        const text = (r.content as { text: string }[])[0]?.text ?? "";
        return r.isError ? { error: text } : JSON.parse(text);
      };
      await call("inbox");
      const nc = await connect({
        servers: url,
        authenticator: credsAuthenticator(
          new TextEncoder().encode(await Deno.readTextFile(`${root}/mallory.creds`)),
        ),
        inboxPrefix: mallory.inboxPrefix,
      });
      const poison = {
        id: crypto.randomUUID(),
        ts: Date.now(),
        space: "default",
        from: { id: "local.mallory", name: "mallory" },
        to: `local.${victim}`,
        parts,
      };
      await nc.jetstream().publish(
        `cotal.default.inst.local.${victim}.local.mallory`,
        new TextEncoder().encode(JSON.stringify(poison)),
        { msgID: poison.id },
      );
      await nc.close();
      await new Promise((r) => setTimeout(r, 2_000));
      // The genuine DM comes after the poison.
      const sent = await cotal([
        "send",
        "--root",
        root,
        "--to",
        `local.${victim}`,
        `genuine to ${victim}`,
      ]);
      assert.equal(sent.code, 0, sent.stderr);
      await new Promise((r) => setTimeout(r, 2_000));
      const seen: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await call("wait", { timeout_seconds: 2 });
        if (r.error) console.log(`${victim} wait ${i}: error: ${r.error.slice(0, 160)}`);
        else seen.push(...r.messages.map((m: { text: string }) => m.text));
      }
      console.log(`${victim} saw:`, JSON.stringify(seen));
      if (!seen.includes(`genuine to ${victim}`)) {
        failures.push(`${victim} (parts ${JSON.stringify(parts)}) never saw the genuine DM`);
      }
    }
    assert.deepEqual(failures, []);
  } finally {
    for (const c of clients) await c.close().catch(() => {});
    await cotal(["down", "--root", root], 120_000);
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
