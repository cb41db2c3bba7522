/**
 * Red team 38's stack: `cotal up` in a network namespace of its own (`unshare --net`, every
 * `cotal` through `nsenter --net`), as red teams 34-37 did (`../rt37_fixtures/stack.ts`), with
 * the agent's workdir holding this directory's python3 fixtures. The namespace also gets a veth
 * pair whose near end carries `HOST_V4`/`HOST_V6`: addresses of "the host" that are not
 * loopback, as a real host's LAN address is.
 */
import assert from "node:assert/strict";

const CHECKOUT = new URL("../../..", import.meta.url).pathname.replace(/\/$/, "");
const HERE = new URL(".", import.meta.url).pathname;

/** The stack's host address (IPv4) on its veth, and its directed broadcast. */
export const HOST_V4 = "10.38.0.1";
export const HOST_V4_BCAST = "10.38.0.255";
/** The stack's host address (IPv6, unique local). */
export const HOST_V6 = "fd38::1";

export interface Rt38Stack {
  root: string;
  work: string;
  port: string;
  holder: number;
  inNs(cmd: string[], timeoutMs?: number): Promise<{ code: number; out: string }>;
  /** Starts a long-running process in the stack's namespace. */
  spawnInNs(cmd: string[]): Deno.ChildProcess;
  cotal(args: string[], timeoutMs?: number): Promise<{ code: number; out: string }>;
  /**
   * Spawns `name` running `/usr/bin/python3 <workdir>/<script> <workdir> <args>`, on the host's
   * network when `hostNet`, else in its own sandbox network (the default).
   */
  spawnAgent(
    name: string,
    script: string,
    args: string[],
    hostNet: boolean,
    extra?: string[],
  ): Promise<{
    code: number;
    out: string;
  }>;
  close(): Promise<void>;
}

/** `files` are copied from `fixtures` (this directory unless another red team's is given). */
export async function rt38Stack(
  tag: string,
  files: string[],
  fixtures: string = HERE,
): Promise<Rt38Stack> {
  const base = `/tmp/rt38-${tag}-${crypto.randomUUID().slice(0, 6)}`;
  const root = `${base}/root`;
  const work = `${base}/w`;
  const port = String(48_000 + Math.floor(Math.random() * 900));
  const holderProc = new Deno.Command("unshare", {
    args: ["--net", "sleep", "900"],
    stdout: "null",
    stderr: "null",
  }).spawn();
  const ns = `--net=/proc/${holderProc.pid}/ns/net`;
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
  const spawnInNs = (cmd: string[]) =>
    new Deno.Command("nsenter", { args: [ns, ...cmd], stdout: "null", stderr: "null" }).spawn();
  const cotal = (args: string[], timeoutMs = 120_000) => {
    const end = args.indexOf("--");
    const a = end < 0
      ? [...args, "--root", root]
      : [...args.slice(0, end), "--root", root, ...args.slice(end)];
    return inNs([Deno.execPath(), "run", "-A", `${CHECKOUT}/cmd/cotal.ts`, ...a], timeoutMs);
  };
  await new Promise((r) => setTimeout(r, 300));
  for (
    const c of [
      ["ip", "link", "set", "lo", "up"],
      ["ip", "link", "add", "rt38a", "type", "veth", "peer", "name", "rt38b"],
      ["ip", "addr", "add", `${HOST_V4}/24`, "dev", "rt38a"],
      ["ip", "-6", "addr", "add", `${HOST_V6}/64`, "dev", "rt38a", "nodad"],
      ["ip", "link", "set", "rt38a", "up"],
      ["ip", "link", "set", "rt38b", "up"],
    ]
  ) {
    const r = await inNs(c);
    assert.equal(r.code, 0, `${c.join(" ")}: ${r.out}`);
  }
  await Deno.mkdir(`${work}/a`, { recursive: true });
  await Deno.chmod(base, 0o755);
  await Deno.chmod(work, 0o755);
  await Deno.chown(`${work}/a`, null, 1500000000);
  await Deno.chmod(`${work}/a`, 0o2777);
  for (const f of files) await Deno.copyFile(`${fixtures}${f}`, `${work}/a/${f}`);
  return {
    root,
    work,
    port,
    holder: holderProc.pid,
    inNs,
    spawnInNs,
    cotal,
    spawnAgent: (name, script, args, hostNet, extra = []) =>
      cotal([
        ...["spawn", "--agent", "program", "--name", name, ...(hostNet ? ["--net", "host"] : [])],
        ...extra,
        ...["--workdir", `${work}/a`, "--", "/usr/bin/python3", `${work}/a/${script}`],
        ...[`${work}/a`, ...args],
      ]),
    async close() {
      const d = await cotal(["down"], 150_000).catch((e) => ({ code: -1, out: String(e) }));
      console.log("down:", d.out.trim().split("\n").slice(-2).join(" | "));
      try {
        holderProc.kill("SIGKILL");
      } catch {
        // Gone.
      }
      await holderProc.status;
      await Deno.remove(base, { recursive: true }).catch(() => {});
    },
  };
}

/** The pid of the running `cotal-supervise` of `root`, if any. */
export function supervisorPid(root: string): number | undefined {
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const cmd = Deno.readTextFileSync(`/proc/${e.name}/cmdline`).split("\0");
      if (cmd.some((a) => /supervise/.test(a)) && cmd.includes(root)) return Number(e.name);
    } catch {
      // Gone.
    }
  }
  return undefined;
}

/** How many descriptors `pid` holds (undefined when it is gone). */
export function fdCount(pid: number): number | undefined {
  try {
    return [...Deno.readDirSync(`/proc/${pid}/fd`)].length;
  } catch {
    return undefined;
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
