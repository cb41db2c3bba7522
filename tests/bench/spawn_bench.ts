/**
 * Spawn-to-presence latency of the built-in task runner (bwrap + pty + the cotal-agent row,
 * provisioning and the readiness wait included), and the memory of a supervisor running 20
 * agents: the cotal-supervise process (started under its own row, as `cotal up` does) and each
 * agent runner (the Deno process inside bwrap, plus bwrap's own two processes).
 *
 * With `--baseline <git ref>`, the same measures for the supervisor of that commit (a worktree
 * under /tmp), against the same broker in the same run: the cost of a change, side by side.
 *
 *   deno run -A tests/bench/spawn_bench.ts [--write] [--baseline <ref>] [--local-only]
 */
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { waitFor } from "../_harness/broker.ts";
import { testBwrap } from "../manager/_agent_fixture.ts";
import { type ManagerMesh, startManagerMesh } from "../manager/_manager_mesh.ts";
import { percentile, runContext, writeSection } from "./_report.ts";
import { managerInstanceId } from "../../lib/manager/manager_types.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { spaceKeyHex, supervisorCredsKey } from "../../lib/workspace/keys.ts";
import { type DaemonProcess, startExecutable } from "../delivery/_helpers.ts";

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

interface Measured {
  latency: number[];
  spawn20: number;
  idleSupervisor: number;
  supervisorRss: number;
  supervisorPss: number;
  runners: number[];
  runnersAnon: number[];
  runnersPss: number[];
  sandboxes: number[];
  online: number;
}

/**
 * Runs the supervisor of `checkout` (this one, or a worktree of an earlier commit) under its
 * own row, as `cotal up` would, against `mesh`, and measures it.
 */
async function measure(
  checkout: string,
  mesh: ManagerMesh,
  bwrap: string,
  remote = false,
): Promise<Measured> {
  const perms = await import(`${checkout}/lib/permissions.ts`);
  const layout = { root: mesh.root, broker: [mesh.url.replace("nats://", "")] };
  let agentSocketDir: string | undefined;
  try {
    const setup = await import(`${checkout}/lib/manager/agent_setup.ts`);
    const types = await import(`${checkout}/lib/manager/manager_types.ts`);
    agentSocketDir = setup.agentSocketDir(layout, types.managerInstanceId(mesh.root, mesh.space));
  } catch {
    // A checkout before the per-agent sockets.
  }
  const sup = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...perms.denoRunFlags("cotal-supervise", {
        ...layout,
        supervisorPrograms: [Deno.execPath(), bwrap, "/usr/bin/kill"],
        ...(agentSocketDir ? { agentSocketDir } : {}),
        ...(remote ? { remoteSigner: true } : {}),
      }),
      `--config=${checkout}/deno.json`,
      `${checkout}/cmd/supervise.ts`,
      "--root",
      mesh.root,
      "--space",
      mesh.space,
      "--server",
      mesh.url,
      ...(remote ? ["--signer", "remote"] : []),
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
  // Warm-up: the first spawn fills caches (the module graph) every later one reuses.
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
  const m: Measured = {
    latency,
    spawn20,
    idleSupervisor,
    supervisorRss: rssMb(sup.pid),
    supervisorPss: pssMb(sup.pid),
    runners: [],
    runnersAnon: [],
    runnersPss: [],
    sandboxes: [],
    online: 0,
  };
  for (const pid of tree(sup.pid).slice(1)) {
    const cmd = cmdline(pid);
    if (cmd.startsWith(bwrap)) m.sandboxes.push(rssMb(pid));
    else if (cmd.includes("cmd/agent.ts")) {
      m.runners.push(rssMb(pid));
      m.runnersAnon.push(statusMb(pid, "RssAnon"));
      m.runnersPss.push(pssMb(pid));
    }
  }
  m.online = (await ctl.request<{ agents: AgentRow[] }>("ps")).agents.filter((r) => r.present)
    .length;
  // Despawned first: a supervisor's stop keeps its roster for the next one, which would bring
  // these agents back into the next measurement.
  for (let i = 0; i < AGENTS; i++) await ctl.request("despawn", { name: `a_${i}` });
  sup.kill("SIGTERM");
  await sup.status;
  return m;
}

/** A worktree of `ref` beside this checkout (made once, reused), for the baseline run. */
async function worktree(ref: string): Promise<string> {
  const here = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
  const git = (args: string[]) =>
    new Deno.Command("git", { args: ["-C", here, ...args], stdout: "piped", stderr: "piped" })
      .output();
  const sha = new TextDecoder().decode((await git(["rev-parse", "--short", ref])).stdout).trim();
  if (!sha) throw new Error(`no commit ${ref} in ${here}`);
  const dir = `/tmp/cotal-bench-base-${sha}`;
  try {
    Deno.statSync(`${dir}/cmd/supervise.ts`);
  } catch {
    const out = await git(["worktree", "add", "--detach", dir, sha]);
    if (!out.success) throw new Error(new TextDecoder().decode(out.stderr));
  }
  return dir;
}

/** The space's signer under its row, and the supervisor cred `cotal up` leaves (remote mode). */
async function startSigner(mesh: ManagerMesh): Promise<DaemonProcess> {
  await mesh.store.put(
    supervisorCredsKey(mesh.space, { injected: true }),
    await mintCreds(mesh.auth, newIdentity(), "supervisor", {
      principal: { owner: "local", actor: `manager_${managerInstanceId(mesh.root, mesh.space)}` },
    }),
  );
  const d = startExecutable("cotal-signer", {
    root: mesh.root,
    broker: [mesh.url.replace("nats://", "")],
    spaceKey: `space.${spaceKeyHex(mesh.space)}`,
  }, ["--space", mesh.space, "--server", mesh.url, "--root", mesh.root]);
  await d.waitForLine(/cotal-signer up for space/);
  return d;
}

const baselineAt = Deno.args.indexOf("--baseline");
const baselineRef = baselineAt >= 0 ? Deno.args[baselineAt + 1] : undefined;
await using mesh = await startManagerMesh("bench");
const bwrap = await testBwrap();
const here = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
// The baseline first: a first run pays for cold caches, and the change should not be favoured.
const base = baselineRef ? await measure(await worktree(baselineRef), mesh, bwrap) : undefined;
const now = await measure(here, mesh, bwrap);
// The same supervisor signing through cotal-signer (what cotal up runs), same broker, same run.
let remote: Measured | undefined;
if (!Deno.args.includes("--local-only")) {
  const signer = await startSigner(mesh);
  try {
    remote = await measure(here, mesh, bwrap, true);
  } finally {
    signer.kill();
    await signer.exited;
  }
}
const { latency, spawn20, idleSupervisor, supervisorRss, supervisorPss } = now;
const { runners, runnersAnon, runnersPss, sandboxes, online } = now;

const f = (n: number) => n.toFixed(0);
const f1 = (n: number) => n.toFixed(1);
const perAgent = [...runners].sort((a, b) => a - b);
const report = `
### Spawning agents (\`cotal-supervise\`, built-in task runner, bwrap + pty)

${
  runContext(
    `deno run -A tests/bench/spawn_bench.ts --write${
      baselineRef ? ` --baseline ${baselineRef}` : ""
    }`,
  )
}
The supervisor runs as \`deno run <cotal-supervise row> cmd/supervise.ts\`; spawns go over the
control rail from a control-caller client; each spawn provisions the agent (durables, ACL row,
minted creds), makes its sandbox (its own uid, sockets, cgroup), writes its launch file,
starts \`bwrap ... setpriv ... deno run <cotal-agent row> cmd/agent.ts\` on a pty and answers
once the agent's presence row appears.

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
${
  base
    ? `
Against the supervisor of \`${baselineRef}\` (the sandbox before the allowlist root, own uids,
network namespace, seccomp, limits and broker relay), same broker, same run:

| measure | now | ${baselineRef} | ratio |
|---|---|---|---|
| spawn to presence, p50 | ${f(percentile(latency, 50))} ms | ${
      f(percentile(base.latency, 50))
    } ms | ${(percentile(latency, 50) / percentile(base.latency, 50)).toFixed(2)}× |
| ${AGENTS} spawns back to back | ${f(spawn20)} ms | ${f(base.spawn20)} ms | ${
      (spawn20 / base.spawn20).toFixed(2)
    }× |
| supervisor RSS, ${AGENTS} agents | ${f1(supervisorRss)} MB | ${f1(base.supervisorRss)} MB | ${
      (supervisorRss / base.supervisorRss).toFixed(2)
    }× |
| agent runner RSS, median | ${f1(percentile(runners, 50))} MB | ${
      f1(percentile(base.runners, 50))
    } MB | |
`
    : ""
}
${
  remote
    ? `
The same supervisor signing every credential through the space's \`cotal-signer\` (a real
process under its row; \`--signer remote\`, what \`cotal up\` runs), same broker, same run:

| measure | local signing | through cotal-signer | ratio |
|---|---|---|---|
| spawn to presence, p50 | ${f(percentile(latency, 50))} ms | ${
      f(percentile(remote.latency, 50))
    } ms | ${(percentile(remote.latency, 50) / percentile(latency, 50)).toFixed(2)}× |
| ${AGENTS} spawns back to back | ${f(spawn20)} ms | ${f(remote.spawn20)} ms | ${
      (remote.spawn20 / spawn20).toFixed(2)
    }× |
| agents online at the end | ${online} | ${remote.online} | |
`
    : ""
}
A runner's RSS counts ~37 MB of the deno binary's mapped text, shared by every runner (and the
supervisor); its own memory is the private (anonymous) part, and PSS splits the shared pages
among the processes using them. Of the rest, importing \`npm:nats\` (which the endpoint needs)
costs ~17 MB over an empty \`deno run\` (37 MB); V8 flags (\`--max-semi-space-size=1\`,
\`--optimize-for-size\`, \`--lite-mode\`) saved at most 5 MB of RSS and cost spawn latency, so
the runner runs without them.
`;
console.log(report);
if (Deno.args.includes("--write")) await writeSection("spawn", report);
