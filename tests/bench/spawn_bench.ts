/**
 * Spawn-to-presence latency of the built-in task runner (bwrap + pty + the cotal-agent row,
 * provisioning and the readiness wait included), and the memory of a supervisor running 20
 * agents: the cotal-supervise process (started under its own row, as `cotal up` does) and each
 * agent runner (the Deno process inside bwrap, plus bwrap's own two processes).
 *
 *   deno run -A tests/bench/spawn_bench.ts [--write]
 */
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { denoRunFlags } from "../../lib/permissions.ts";
import { waitFor } from "../_harness/broker.ts";
import { testBwrap } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";
import { percentile, runContext, writeSection } from "./_report.ts";

const LATENCY_RUNS = 12;
const AGENTS = 20;

function statusMb(pid: number, field: string): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(Deno.readTextFileSync(`/proc/${pid}/status`));
  return m ? Number(m[1]) / 1024 : NaN;
}

function rssMb(pid: number): number {
  return statusMb(pid, "VmRSS");
}

/** Proportional set size: shared pages (the deno binary's text) split among their users. */
function pssMb(pid: number): number {
  const m = /^Pss:\s+(\d+) kB/m.exec(Deno.readTextFileSync(`/proc/${pid}/smaps_rollup`));
  return m ? Number(m[1]) / 1024 : NaN;
}

function children(pid: number): number[] {
  const out: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const st = Deno.readTextFileSync(`/proc/${e.name}/stat`);
      if (Number(st.slice(st.lastIndexOf(")") + 2).split(" ")[1]) === pid) out.push(Number(e.name));
    } catch {
      // Gone.
    }
  }
  return out;
}

function tree(pid: number): number[] {
  const all = [pid];
  for (let i = 0; i < all.length; i++) all.push(...children(all[i]));
  return all;
}

function cmdline(pid: number): string {
  try {
    return Deno.readTextFileSync(`/proc/${pid}/cmdline`).replaceAll("\0", " ");
  } catch {
    return "";
  }
}

await using mesh = await startManagerMesh("bench");
const bwrap = await testBwrap();
const sup = new Deno.Command(Deno.execPath(), {
  args: [
    "run",
    ...denoRunFlags("cotal-supervise", {
      root: mesh.root,
      broker: [mesh.url.replace("nats://", "")],
      supervisorPrograms: [Deno.execPath(), bwrap],
    }),
    `--config=${new URL("../../deno.json", import.meta.url).pathname}`,
    new URL("../../cmd/supervise.ts", import.meta.url).pathname,
    "--root",
    mesh.root,
    "--space",
    mesh.space,
    "--server",
    mesh.url,
  ],
  clearEnv: true,
  env: { PATH: "/usr/bin:/bin", HOME: Deno.env.get("HOME") ?? "/root", COTAL_BWRAP: bwrap },
  stdout: "null",
  stderr: "null",
}).spawn();
const ctl = await mesh.control();
await waitFor(
  async () => (await ctl.request("status", {}, { timeoutMs: 1_000 }).catch(() => null)) !== null,
  { timeoutMs: 30_000, what: "the supervisor" },
);
const spawn = (name: string) =>
  ctl.request<AgentRow>("spawn", { name, role: "bench", command: "/bin/cat" }, {
    timeoutMs: 60_000,
  });

// Warm-up: the first spawn fills caches (bwrap probe, module graph) every later one reuses.
await spawn("warm");
await ctl.request("despawn", { name: "warm" });
const latency: number[] = [];
for (let i = 0; i < LATENCY_RUNS; i++) {
  const t0 = performance.now();
  await spawn(`lat_${i}`);
  latency.push(performance.now() - t0);
  await ctl.request("despawn", { name: `lat_${i}` });
}
const idleSupervisor = rssMb(sup.pid);

const t20 = performance.now();
for (let i = 0; i < AGENTS; i++) await spawn(`a_${i}`);
const spawn20 = performance.now() - t20;
await new Promise((r) => setTimeout(r, 3_000));
const supervisorRss = rssMb(sup.pid);
const supervisorPss = pssMb(sup.pid);
const runners: number[] = [];
const runnersAnon: number[] = [];
const runnersPss: number[] = [];
const sandboxes: number[] = [];
for (const pid of tree(sup.pid).slice(1)) {
  const cmd = cmdline(pid);
  if (!cmd.includes("/agents/a_")) continue;
  if (cmd.startsWith(bwrap)) sandboxes.push(rssMb(pid));
  else if (cmd.includes("cmd/agent.ts")) {
    runners.push(rssMb(pid));
    runnersAnon.push(statusMb(pid, "RssAnon"));
    runnersPss.push(pssMb(pid));
  }
}
const rows = (await ctl.request<{ agents: AgentRow[] }>("ps")).agents;
const online = rows.filter((r) => r.present).length;
sup.kill("SIGTERM");
await sup.status;

const f = (n: number) => n.toFixed(0);
const f1 = (n: number) => n.toFixed(1);
const perAgent = [...runners].sort((a, b) => a - b);
const report = `
### Spawning agents (\`cotal-supervise\`, built-in task runner, bwrap + pty)

${runContext("deno run -A tests/bench/spawn_bench.ts --write")}
The supervisor runs as \`deno run <cotal-supervise row> cmd/supervise.ts\`; spawns go over the
control rail from a control-caller client; each spawn provisions the agent (durables, ACL row,
minted creds), writes its launch file, starts \`bwrap ... deno run <cotal-agent row>
cmd/agent.ts\` on a pty and answers once the agent's presence row appears.

| measure | value | target |
|---|---|---|
| spawn to presence, p50 (${LATENCY_RUNS} spawns, one at a time) | ${
  f(percentile(latency, 50))
} ms | ≤ 1500 ms |
| spawn to presence, p90 / max | ${f(percentile(latency, 90))} / ${f(Math.max(...latency))} ms | |
| ${AGENTS} spawns back to back | ${f(spawn20)} ms (${f(spawn20 / AGENTS)} ms each) | |
| supervisor RSS, no agents | ${f1(idleSupervisor)} MB | |
| supervisor RSS, ${AGENTS} agents | ${f1(supervisorRss)} MB (PSS ${f1(supervisorPss)}) | ≤ 120 MB |
| agent runner RSS (Deno inside bwrap), median / max of ${perAgent.length} | ${
  f1(percentile(perAgent, 50))
} / ${f1(Math.max(...perAgent))} MB | ≤ 60 MB |
| agent runner private (RssAnon) / PSS, median | ${f1(percentile(runnersAnon, 50))} / ${
  f1(percentile(runnersPss, 50))
} MB | |
| bwrap's two processes per agent, together | ${
  f1((sandboxes.reduce((a, b) => a + b, 0)) / Math.max(1, perAgent.length))
} MB | |
| agents online in presence at the end | ${online} of ${AGENTS} | |

A runner's RSS counts ~37 MB of the deno binary's mapped text, shared by every runner (and the
supervisor); its own memory is the private (anonymous) part, and PSS splits the shared pages
among the processes using them. Of the rest, importing \`npm:nats\` (which the endpoint needs)
costs ~17 MB over an empty \`deno run\` (37 MB); V8 flags (\`--max-semi-space-size=1\`,
\`--optimize-for-size\`, \`--lite-mode\`) saved at most 5 MB of RSS and cost spawn latency, so
the runner runs without them.
`;
console.log(report);
if (Deno.args.includes("--write")) await writeSection("spawn", report);
