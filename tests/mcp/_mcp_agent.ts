/**
 * Test and bench helpers for `cotal mcp`: provision an agent on a delivery space, start the
 * server as a real process and drive it with the MCP SDK's own client over stdio.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { newIdentity } from "../../lib/trust/mod.ts";
import { newLifecycleUid, provisionAgent } from "../../lib/wire/mod.ts";
import { MCP_V8_FLAGS } from "../../lib/manager/mcp_command.ts";
import { denoDir } from "../../lib/manager/start_runner.ts";
import { tempDir } from "../_harness/broker.ts";
import type { DeliverySpace } from "../delivery/_helpers.ts";

export const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;
export const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

export interface McpAgent {
  readonly id: string;
  readonly client: Client;
  readonly inbox: string;
  /** The server process's pid. */
  readonly pid: number;
  call(name: string, args?: Record<string, unknown>): Promise<Answer>;
  close(): Promise<void>;
}

export interface Answer {
  isError: boolean;
  text: string;
  // deno-lint-ignore no-explicit-any
  json: any;
}

export interface Provisioned {
  id: string;
  creds: string;
  uid: string;
  role?: string;
}

export async function provision(
  s: DeliverySpace,
  actor: string,
  role?: string,
  channels: string[] = ["general"],
): Promise<Provisioned> {
  const uid = newLifecycleUid();
  const p = await provisionAgent({
    servers: s.url,
    creds: await s.mint("provisioner"),
    space: s.space,
    auth: s.auth,
    identity: newIdentity(),
    principal: { owner: "local", actor },
    lifecycleUid: uid,
    subscribe: ["general"],
    allowSubscribe: channels,
    allowPublish: channels,
    ...(role ? { role } : {}),
  });
  return { id: `local.${actor}`, creds: p.creds, uid, ...(role ? { role } : {}) };
}

/** The `deno run` arguments of `cotal mcp` as `who`, from its creds file, on `s`'s broker. */
export function mcpArgs(
  s: DeliverySpace,
  who: Provisioned,
  credsFile: string,
  inbox: string,
  extra: string[] = [],
): string[] {
  return [
    "run",
    "-A",
    `--v8-flags=${MCP_V8_FLAGS.join(",")}`,
    `--config=${CONFIG}`,
    COTAL,
    "mcp",
    ...["--creds", credsFile, "--space", s.space, "--lifecycle", who.uid],
    ...["--server", s.url, "--inbox", inbox, ...extra],
  ];
}

export async function startMcp(
  s: DeliverySpace,
  who: Provisioned & { role?: string },
  inbox?: string,
): Promise<McpAgent> {
  const dir = await tempDir("cotal-mcp-");
  const credsFile = `${dir}/agent.creds`;
  await Deno.writeTextFile(credsFile, who.creds, { mode: 0o600 });
  const inboxDir = inbox ?? `${dir}/inbox`;
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args: mcpArgs(s, who, credsFile, inboxDir, [
      "--channel",
      "general",
      ...(who.role ? ["--role", who.role] : []),
    ]),
    // The child resolves npm packages from the same cache as this process.
    env: { PATH: "/usr/bin:/bin", HOME: dir, DENO_DIR: denoDir() },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (c: Uint8Array) => (stderr += new TextDecoder().decode(c)));
  const client = new Client({ name: "cotal-test", version: "1" });
  await client.connect(transport).catch((err: Error) => {
    throw new Error(`cotal mcp did not start: ${err.message}\n${stderr}`);
  });
  return {
    id: who.id,
    client,
    inbox: inboxDir,
    pid: transport.pid!,
    async call(name, args = {}) {
      const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
      const text = (r.content as { type: string; text: string }[])[0]?.text ?? "";
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      return { isError: r.isError === true, text, json };
    },
    async close() {
      await client.close();
    },
  };
}
