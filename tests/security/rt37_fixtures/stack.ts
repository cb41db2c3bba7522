/**
 * Red team 37's stack: `cotal up` in a network namespace of its own (`unshare --net`, every
 * `cotal` through `nsenter --net`), as red teams 34-36 did (`../_netns_stack.ts`), with the
 * agent's workdir holding this directory's python3 fixtures. Memory is host-wide whatever the
 * namespace; the namespace only keeps the agent's host network away from this machine's own.
 */
import assert from "node:assert/strict";

const CHECKOUT = new URL("../../..", import.meta.url).pathname.replace(/\/$/, "");
const HERE = new URL(".", import.meta.url).pathname;

export interface Rt37Stack {
  root: string;
  work: string;
  port: string;
  holder: number;
  inNs(cmd: string[], timeoutMs?: number): Promise<{ code: number; out: string }>;
  cotal(args: string[], timeoutMs?: number): Promise<{ code: number; out: string }>;
  /** Spawns `name` on the host's network: `/usr/bin/python3 <workdir>/<script> <workdir> <args>`. */
  spawnHostAgent(name: string, script: string, args: string[], extra?: string[]): Promise<{
    code: number;
    out: string;
  }>;
  close(): Promise<void>;
}

export async function rt37Stack(tag: string, files: string[]): Promise<Rt37Stack> {
  const base = `/tmp/rt37-${tag}-${crypto.randomUUID().slice(0, 6)}`;
  const root = `${base}/root`;
  const work = `${base}/w`;
  const port = String(47_000 + Math.floor(Math.random() * 900));
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
  await Deno.chown(`${work}/a`, null, 1500000000);
  await Deno.chmod(`${work}/a`, 0o2777);
  for (const f of files) await Deno.copyFile(`${HERE}${f}`, `${work}/a/${f}`);
  return {
    root,
    work,
    port,
    holder: holderProc.pid,
    inNs,
    cotal,
    spawnHostAgent: (name, script, args, extra = []) =>
      cotal([
        ...["spawn", "--agent", "program", "--name", name, "--net", "host", ...extra],
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

/** Sums the Rmem column of `/proc/net/netlink` as a process in the stack's namespace sees it. */
export async function netlinkRmem(s: Rt37Stack): Promise<number> {
  const r = await s.inNs(["cat", "/proc/net/netlink"]);
  let sum = 0;
  for (const line of r.out.trim().split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length > 4) sum += Number(f[4]) || 0;
  }
  return sum;
}

/** `/proc/meminfo`'s value for `key`, in bytes. */
export function meminfo(key: string): number {
  const m = Deno.readTextFileSync("/proc/meminfo").match(new RegExp(`^${key}:\\s+(\\d+) kB`, "m"));
  return m ? Number(m[1]) * 1024 : 0;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
