/**
 * A Cotal stack in a network namespace of its own (`unshare --net`, every `cotal` through
 * `nsenter --net`), so an agent that takes every ephemeral port of its "host network" cannot
 * touch anything else on this shared machine: red teams 34, 35 and 36's full-stack attacks on a
 * `--net host` agent. The agent's workdir holds its fixture files.
 */
import assert from "node:assert/strict";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

export interface NetnsStack {
  root: string;
  work: string;
  port: string;
  inNs(cmd: string[], timeoutMs?: number): Promise<{ code: number; out: string }>;
  cotal(args: string[], timeoutMs?: number): Promise<{ code: number; out: string }>;
  brokerPid(): number;
  readLog(): Promise<string>;
  /** Spawns `mallory` on the host's network running `/usr/bin/perl <workdir>/<script> <args>`. */
  spawnHostAgent(script: string, args: string[]): Promise<{ code: number; out: string }>;
  close(): Promise<void>;
}

/** Which red team's fixtures: `tests/security/<team>_fixtures/<files>`, and the log they write. */
export interface NetnsFixtures {
  readonly team: "rt34" | "rt35" | "rt36";
  readonly files: readonly string[];
  readonly log: string;
}

export async function netnsStack(tag: string, fixtures: NetnsFixtures): Promise<NetnsStack> {
  const base = `/tmp/${fixtures.team}-${tag}-${crypto.randomUUID().slice(0, 6)}`;
  const root = `${base}/root`;
  const work = `${base}/w`;
  // The port lies in the kernel's ephemeral range (32768-60999), as every port of this run.
  const port = String(46_300 + Math.floor(Math.random() * 600));
  const holder = new Deno.Command("unshare", {
    args: ["--net", "sleep", "900"],
    stdout: "null",
    stderr: "null",
  }).spawn();
  const ns = `--net=/proc/${holder.pid}/ns/net`;
  const inNs = async (cmd: string[], timeoutMs = 120_000) => {
    const out = await new Deno.Command("nsenter", {
      args: [ns, ...cmd],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(timeoutMs),
    }).output();
    const dec = new TextDecoder();
    return { code: out.code, out: dec.decode(out.stdout) + dec.decode(out.stderr) };
  };
  const cotal = (args: string[], timeoutMs = 120_000) => {
    const end = args.indexOf("--");
    const a = end < 0
      ? [...args, "--root", root]
      : [...args.slice(0, end), "--root", root, ...args.slice(end)];
    return inNs([Deno.execPath(), "run", "-A", `${CHECKOUT}/cmd/cotal.ts`, ...a], timeoutMs);
  };
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await inNs(["ip", "link", "set", "lo", "up"])).code, 0);
  await Deno.mkdir(`${work}/a`, { recursive: true });
  await Deno.chmod(base, 0o755);
  await Deno.chmod(work, 0o755);
  // The agent's uid is not known before the spawn: a group-writable dir its gid reaches.
  await Deno.chown(`${work}/a`, null, 1500000000);
  await Deno.chmod(`${work}/a`, 0o2777);
  for (const f of fixtures.files) {
    await Deno.copyFile(
      `${CHECKOUT}/tests/security/${fixtures.team}_fixtures/${f}`,
      `${work}/a/${f}`,
    );
  }
  return {
    root,
    work,
    port,
    inNs,
    cotal,
    brokerPid() {
      for (const e of Deno.readDirSync("/proc")) {
        if (!/^\d+$/.test(e.name)) continue;
        try {
          const cmd = Deno.readTextFileSync(`/proc/${e.name}/cmdline`).split("\0");
          if (cmd[0].endsWith("nats-server") && cmd.includes(`${root}/broker/nats.conf`)) {
            return Number(e.name);
          }
        } catch {
          // Gone.
        }
      }
      return 0;
    },
    readLog: () => Deno.readTextFile(`${work}/a/${fixtures.log}`).catch(() => ""),
    spawnHostAgent: (script, args) =>
      cotal([
        ...["spawn", "--agent", "program", "--name", "mallory", "--net", "host"],
        ...["--workdir", `${work}/a`, "--", "/usr/bin/perl", `${work}/a/${script}`, ...args],
      ]),
    async close() {
      const d = await cotal(["down"], 150_000).catch((e) => ({ code: -1, out: String(e) }));
      console.log("down:", d.out.trim().split("\n").slice(-2).join(" | "));
      try {
        holder.kill("SIGKILL");
      } catch {
        // Gone.
      }
      await holder.status;
      await Deno.remove(base, { recursive: true }).catch(() => {});
    },
  };
}

/** Waits for the agent's fixture to say it holds the whole range; returns how many ports. */
export async function waitFull(work: string, timeoutMs = 120_000): Promise<number> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const t = await Deno.readTextFile(`${work}/a/full`).catch(() => "");
    if (t.trim()) return Number(t.trim());
    await new Promise((r) => setTimeout(r, 500));
  }
  return 0;
}
