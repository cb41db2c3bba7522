/**
 * Fault pass 12 helpers: a full detached stack (`cotal up --detach`) under a temp root, its
 * processes found by root path, `cotal` runs with a deadline, members provisioned with `cotal
 * mint --provision` and driven over `cotal mcp`. Not a test file.
 */
import { tempDir, waitFor } from "../_harness/broker.ts";
import { processesMentioning } from "../manager/_manager_mesh.ts";
import { type McpAgent, type Provisioned, startMcp } from "../mcp/_mcp_agent.ts";
import type { DeliverySpace } from "../delivery/_helpers.ts";

export const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

/** A free loopback port in 49000-49999. */
export function rangePort(): number {
  for (let i = 0; i < 200; i++) {
    const port = 49300 + Math.floor(Math.random() * 690);
    try {
      const l = Deno.listen({ hostname: "127.0.0.1", port });
      l.close();
      return port;
    } catch {
      // Taken.
    }
  }
  throw new Error("no free port in 49300-49990");
}

export interface Run {
  code: number;
  text: string;
  timedOut: boolean;
}

/** `cotal <args> --root <root>` as a process, killed (and said so) past `timeoutMs`. */
export async function cotalRun(
  root: string,
  args: string[],
  timeoutMs = 120_000,
): Promise<Run> {
  const end = args.indexOf("--");
  const withRoot = end < 0
    ? [...args, "--root", root]
    : [...args.slice(0, end), "--root", root, ...args.slice(end)];
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...withRoot],
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
  }).spawn();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch {
      // Gone.
    }
  }, timeoutMs);
  const out = await child.output();
  clearTimeout(timer);
  return {
    code: out.code,
    text: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr),
    timedOut,
  };
}

/** `cotal <args>` started and left running: for a kill -9 mid-command. */
export function cotalSpawn(root: string, args: string[]): Deno.ChildProcess {
  const end = args.indexOf("--");
  const withRoot = end < 0
    ? [...args, "--root", root]
    : [...args.slice(0, end), "--root", root, ...args.slice(end)];
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...withRoot],
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
  }).spawn();
}

/** The pids whose command line mentions `root` and `needle`. */
export function pidsOf(root: string, needle: string): number[] {
  return processesMentioning(root).filter((p) => {
    try {
      return Deno.readTextFileSync(`/proc/${p}/cmdline`).includes(needle);
    } catch {
      return false;
    }
  });
}

export function kill9(pids: number[]): void {
  for (const p of pids) {
    try {
      Deno.kill(p, "SIGKILL");
    } catch {
      // Gone.
    }
  }
}

/** Waits (bounded) until `cotal status` exits 0; returns its last output. */
export async function waitHealthy(root: string, timeoutMs = 90_000): Promise<string> {
  let last = "";
  await waitFor(async () => {
    const s = await cotalRun(root, ["status"], 30_000);
    last = s.text;
    return s.code === 0;
  }, { timeoutMs, intervalMs: 2_000 }).catch(() => {
    throw new Error(`the stack did not heal within ${timeoutMs} ms; last status:\n${last}`);
  });
  return last;
}

export interface Stack {
  base: string;
  root: string;
  port: number;
  url: string;
  /** Everything still running that mentions the root (after down: should be nothing). */
  leftovers(): number[];
  [Symbol.asyncDispose](): Promise<void>;
}

/** A detached stack on a fresh root; disposing it runs `down` and kills whatever is left. */
export async function startStack(prefix: string, extra: string[] = []): Promise<Stack> {
  const base = await tempDir(`cotal-fp12-${prefix}-`);
  const root = `${base}/.cotal`;
  const port = rangePort();
  const up = await cotalRun(root, ["up", "--detach", "--port", String(port), ...extra], 180_000);
  if (up.code !== 0) throw new Error(`up failed: ${up.text}`);
  return {
    base,
    root,
    port,
    url: `nats://127.0.0.1:${port}`,
    leftovers: () => processesMentioning(root),
    async [Symbol.asyncDispose]() {
      // Continue anything a test froze, then down, then kill what is left (ours: it names the root).
      for (const p of processesMentioning(root)) {
        try {
          Deno.kill(p, "SIGCONT");
        } catch {
          // Gone.
        }
      }
      await cotalRun(root, ["down"], 120_000).catch(() => {});
      kill9(processesMentioning(root));
      kill9(processesMentioning(base));
    },
  };
}

/** `cotal mint --profile agent --provision` for `actor`. */
export async function provisionCli(
  stack: Stack,
  actor: string,
  opts: { role?: string; channel?: string } = {},
): Promise<Provisioned> {
  const out = `${stack.base}/${actor}.creds`;
  const r = await cotalRun(stack.root, [
    "mint",
    "--profile",
    "agent",
    "--provision",
    "--actor",
    actor,
    "--channel",
    opts.channel ?? "general",
    ...(opts.role ? ["--role", opts.role] : []),
    "--out",
    out,
  ]);
  if (r.code !== 0) throw new Error(`mint failed: ${r.text}`);
  const uid = /lifecycle uid ([a-z0-9]+)/.exec(r.text)![1];
  return {
    id: `local.${actor}`,
    creds: await Deno.readTextFile(out),
    uid,
    ...(opts.role ? { role: opts.role } : {}),
  };
}

/** `cotal mcp` as a provisioned member of the stack's default space. */
export function mcpOn(stack: Stack, who: Provisioned, inbox?: string): Promise<McpAgent> {
  const s = { url: stack.url, space: "default" } as unknown as DeliverySpace;
  return startMcp(s, who, inbox);
}

/** Collects texts from `wait` until `want` are all in, or the deadline passes. */
export async function collect(
  agent: McpAgent,
  want: string[],
  timeoutMs: number,
): Promise<{ got: string[]; missing: string[] }> {
  const got: string[] = [];
  const deadline = Date.now() + timeoutMs;
  const missing = () => want.filter((t) => !got.includes(t));
  while (Date.now() < deadline && missing().length > 0) {
    const r = await agent.call("wait", { timeout_seconds: 5 });
    if (r.isError) continue;
    for (const m of r.json?.messages ?? []) got.push(m.text);
  }
  return { got, missing: missing() };
}

/** Sends `n` messages with `cotal send`, one process each; returns the texts acknowledged. */
export async function sendBurst(
  root: string,
  target: string[],
  prefix: string,
  n: number,
  onEach?: (i: number) => void | Promise<void>,
): Promise<{ acked: string[]; refused: string[] }> {
  const acked: string[] = [];
  const refused: string[] = [];
  for (let i = 0; i < n; i++) {
    await onEach?.(i);
    const text = `${prefix}-${i}`;
    const r = await cotalRun(root, ["send", ...target, text], 60_000);
    if (r.code === 0 && /^sent /m.test(r.text)) acked.push(text);
    else refused.push(`${text}: ${r.text.split("\n")[0]}`);
  }
  return { acked, refused };
}
