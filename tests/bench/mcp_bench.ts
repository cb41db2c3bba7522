/**
 * `cotal mcp` against the endpoint it wraps, on the same broker, in the same run: a channel post
 * from one agent to another, as an AI harness sees it (the sender's `post` tool call until the
 * receiver's pending `wait` call returns, both through the MCP SDK's client over stdio) and as
 * an embedder sees it (`multicast` until the peer's `message` event). Plus the resident memory
 * of a `cotal mcp` process and of a process holding one started endpoint.
 *
 *   deno run -A tests/bench/mcp_bench.ts           # print the table
 *   deno run -A tests/bench/mcp_bench.ts --write   # also update docs/BENCHMARKS.md
 *
 * Rounds alternate between the columns so machine load hits both alike. Not a test: timings
 * are reported, never asserted.
 */
import { MCP_V8_FLAGS } from "../../lib/manager/mcp_command.ts";
import { CotalEndpoint } from "../../lib/endpoint/mod.ts";
import { percentile, runContext, writeSection } from "./_report.ts";
import { startDeliverySpace } from "../delivery/_helpers.ts";
import { type McpAgent, provision, startMcp } from "../mcp/_mcp_agent.ts";
import { tempDir } from "../_harness/broker.ts";

const ROUNDS = 5;
const PER_ROUND = 100;

if (Deno.args[0] === "--endpoint-child") await endpointChild(Deno.args.slice(1));
else await main();

/** A process that holds one started endpoint (the memory baseline) until stdin closes. */
async function endpointChild([url, space, credsFile, uid]: string[]): Promise<void> {
  const creds = await Deno.readTextFile(credsFile);
  const actor = "membase";
  const ep = new CotalEndpoint({
    space,
    servers: url,
    card: { name: actor, owner: "local", actor },
    lifecycleUid: uid,
    creds,
    channels: ["general"],
  });
  ep.addEventListener("message", () => {});
  await ep.start();
  console.log("ready");
  for await (const _ of Deno.stdin.readable) { /* until closed */ }
  await ep.stop();
}

function rssKiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
}

async function main(): Promise<void> {
  await using s = await startDeliverySpace({ prefix: "mcpbench" });
  const endpoint = async (actor: string) => {
    const p = await provision(s, actor);
    const ep = new CotalEndpoint({
      space: s.space,
      servers: s.url,
      card: { name: actor, owner: "local", actor },
      lifecycleUid: p.uid,
      creds: p.creds,
      channels: ["general"],
    });
    return ep;
  };
  const epA = await endpoint("epa");
  const epB = await endpoint("epb");
  let arrived: (() => void) | undefined;
  epB.addEventListener("message", () => arrived?.());
  await epA.start();
  await epB.start();
  const mcpA: McpAgent = await startMcp(s, await provision(s, "mcpa"));
  const mcpB: McpAgent = await startMcp(s, await provision(s, "mcpb"));
  const lat = { endpoint: [] as number[], mcp: [] as number[] };
  try {
    const viaEndpoint = async () => {
      const got = new Promise<void>((r) => (arrived = r));
      const t0 = performance.now();
      await epA.multicast("ping", { channel: "general" });
      await got;
      lat.endpoint.push(performance.now() - t0);
    };
    const viaMcp = async () => {
      const waiting = mcpB.call("wait", { timeout_seconds: 30 });
      // The receiver's call is in the server before the post leaves.
      await new Promise((r) => setTimeout(r, 5));
      const t0 = performance.now();
      await mcpA.call("post", { channel: "general", text: "ping" });
      const r = await waiting;
      lat.mcp.push(performance.now() - t0);
      if (r.json?.messages?.[0]?.from !== "local.mcpa") {
        throw new Error(`unexpected wait answer: ${r.text}`);
      }
    };
    // The endpoint column's posts reach the MCP receiver too: read them away between columns.
    const drain = async () => {
      await new Promise((r) => setTimeout(r, 300));
      while ((await mcpB.call("inbox", { max: 100 })).json.messages.length > 0) { /* again */ }
    };
    // Warm-up, then alternating rounds.
    for (let i = 0; i < 20; i++) await viaEndpoint();
    await drain();
    for (let i = 0; i < 20; i++) await viaMcp();
    lat.endpoint.length = 0;
    lat.mcp.length = 0;
    const p50s = { endpoint: [] as number[], mcp: [] as number[] };
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, run] of [["endpoint", viaEndpoint], ["mcp", viaMcp]] as const) {
        if (name === "mcp") await drain();
        const from = lat[name].length;
        for (let i = 0; i < PER_ROUND; i++) await run();
        p50s[name].push(percentile(lat[name].slice(from), 50));
      }
    }
    // Memory: a cotal mcp process after the rounds, and a process holding one endpoint.
    const dir = await tempDir("cotal-mcp-bench-");
    const base = await provision(s, "membase");
    await Deno.writeTextFile(`${dir}/base.creds`, base.creds, { mode: 0o600 });
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        // The same V8 flags as cotal mcp, so the difference is the code, not the flags.
        `--v8-flags=${MCP_V8_FLAGS.join(",")}`,
        new URL(import.meta.url).pathname,
        "--endpoint-child",
        s.url,
        s.space,
        `${dir}/base.creds`,
        base.uid,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const reader = child.stdout.getReader();
    await reader.read();
    await new Promise((r) => setTimeout(r, 1000));
    const rss = { mcp: rssKiB(mcpB.pid), endpoint: rssKiB(child.pid) };
    await child.stdin.close();
    reader.releaseLock();
    await child.stdout.cancel();
    await child.status;

    const med = (xs: number[]) => percentile(xs, 50);
    const f = (ms: number) => `${ms.toFixed(2)} ms`;
    const mb = (kib: number) => `${(kib / 1024).toFixed(1)} MB`;
    const table = [
      "| measure | endpoint (multicast → message event) | cotal mcp (post → pending wait returns) | difference |",
      "|---|---:|---:|---:|",
      `| one channel post, p50 | ${f(med(p50s.endpoint))} | ${f(med(p50s.mcp))} | +${
        (med(p50s.mcp) - med(p50s.endpoint)).toFixed(2)
      } ms |`,
      `| one channel post, p99 | ${f(percentile(lat.endpoint, 99))} | ${
        f(percentile(lat.mcp, 99))
      } | +${(percentile(lat.mcp, 99) - percentile(lat.endpoint, 99)).toFixed(2)} ms |`,
      `| resident memory of the process | ${mb(rss.endpoint)} | ${mb(rss.mcp)} | +${
        mb(rss.mcp - rss.endpoint)
      } |`,
    ].join("\n");
    const section = [
      "## lib/mcp: a channel post through cotal mcp vs through the endpoint",
      "",
      `${
        runContext("deno run -A tests/bench/mcp_bench.ts --write")
      } One operator-mode broker; four provisioned agents. The endpoint column is two endpoints in the bench process; the MCP column is two \`cotal mcp\` processes driven by the MCP SDK's client over stdio, the receiver's \`wait\` already pending when the \`post\` call starts. ${ROUNDS} rounds of ${PER_ROUND} posts per column, alternating; p50 is the median of the rounds' p50s, p99 over all posts. Memory: VmRSS of the receiving \`cotal mcp\` after the rounds, and of a process holding one started endpoint (same channels), both run with the V8 flags \`cotal mcp\` ships with (\`${
        MCP_V8_FLAGS.join(" ")
      }\`).`,
      "",
      table,
      "",
      "Targets (issue 14): p50 within 3 ms of the endpoint's, resident memory within 10 MB of an endpoint process.",
    ].join("\n");
    console.log(section);
    if (Deno.args.includes("--write")) await writeSection("mcp", section);
  } finally {
    await mcpA.close();
    await mcpB.close();
    await epA.stop();
    await epB.stop();
  }
}
