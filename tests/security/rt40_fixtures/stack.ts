/**
 * Red team 40's stack: `cotal up` in a network namespace of its own (`unshare --net`, every
 * `cotal` through `nsenter --net`), as red teams 34-39 did (`../rt38_fixtures/stack.ts`), with
 * its base under `/tmp/rt40/` and its broker port in 49000-49899. `setup` lists the `ip`
 * commands that shape the namespace ("the host's network") before `cotal up`; the agent's
 * workdir holds this directory's python3 fixtures. Red teams 41-44 use it with a base dir, port
 * range and fixtures dir of their own ({@linkcode nsStack}).
 */
import assert from "node:assert/strict";

const CHECKOUT = new URL("../../..", import.meta.url).pathname.replace(/\/$/, "");
const HERE = new URL(".", import.meta.url).pathname;

export interface Rt40Stack {
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
  ): Promise<{ code: number; out: string }>;
  close(): Promise<void>;
}

/** Where one red team's stacks live: a base dir, a broker port range, its fixtures. */
export interface NsStackPlace {
  /** Every stack's base goes under it (`/tmp/rt40`). */
  dir: string;
  /** The first of 880 broker ports, taken 4 apart. */
  portBase: number;
  /** The dir the named fixture files are copied from. */
  fixtures: string;
}

export function rt40Stack(
  tag: string,
  files: string[],
  setup: string[][] = [],
): Promise<Rt40Stack> {
  return nsStack({ dir: "/tmp/rt40", portBase: 49_000, fixtures: HERE }, tag, files, setup);
}

/** The stack at `place`: see the module's comment. */
export async function nsStack(
  place: NsStackPlace,
  tag: string,
  files: string[],
  setup: string[][] = [],
): Promise<Rt40Stack> {
  await Deno.mkdir(place.dir, { recursive: true });
  const base = `${place.dir}/s-${tag}-${crypto.randomUUID().slice(0, 6)}`;
  const root = `${base}/root`;
  const work = `${base}/w`;
  const port = String(place.portBase + 4 * Math.floor(Math.random() * 220));
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
  const close = async () => {
    const d = await cotal(["down"], 150_000).catch((e) => ({ code: -1, out: String(e) }));
    console.log("down:", d.out.trim().split("\n").slice(-2).join(" | "));
    try {
      holderProc.kill("SIGKILL");
    } catch {
      // Gone.
    }
    await holderProc.status;
    await Deno.remove(base, { recursive: true }).catch(() => {});
  };
  try {
    await new Promise((r) => setTimeout(r, 300));
    for (const c of [["ip", "link", "set", "lo", "up"], ...setup]) {
      const r = await inNs(c);
      assert.equal(r.code, 0, `${c.join(" ")}: ${r.out}`);
    }
    await Deno.mkdir(`${work}/a`, { recursive: true });
    await Deno.chmod(base, 0o755);
    await Deno.chmod(work, 0o755);
    await Deno.chown(`${work}/a`, null, 1500000000);
    await Deno.chmod(`${work}/a`, 0o2777);
    for (const f of files) await Deno.copyFile(`${place.fixtures}${f}`, `${work}/a/${f}`);
  } catch (e) {
    await close();
    throw e;
  }
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
    close,
  };
}

/** Reads `<dir>/<file>` until it matches `done` or `ms` pass; returns what it held. */
export async function waitFor(path: string, done: RegExp, ms: number): Promise<string> {
  const end = Date.now() + ms;
  let text = "";
  while (Date.now() < end) {
    text = await Deno.readTextFile(path).catch(() => "");
    if (done.test(text)) break;
    await sleep(500);
  }
  return text;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
