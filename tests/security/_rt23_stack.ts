// Red team 23 helpers: a real `cotal up --detach` stack driven through the CLI.
export const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
export const FIX = `${CHECKOUT}/tests/security/rt23_fixtures`;

export async function cotal(args: string[], timeoutMs = 120_000): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${CHECKOUT}/cmd/cotal.ts`, ...args],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(timeoutMs),
  }).output();
  return new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
}

/** A workdir agents (group 1500000000) may write, with fixture files copied in. */
export async function agentDir(dir: string, files: string[]): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  await Deno.chmod(dir.replace(/\/[^/]+$/, ""), 0o755);
  await Deno.chown(dir, null, 1500000000);
  await Deno.chmod(dir, 0o2775);
  for (const f of files) await Deno.copyFile(`${FIX}/${f}`, `${dir}/${f}`);
}

export async function waitUntil(what: string, ms: number, f: () => Promise<boolean>) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return;
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`timed out: ${what}`);
}

export async function pidOf(pattern: string): Promise<number | undefined> {
  const out = await new Deno.Command("pgrep", { args: ["-f", pattern], stdout: "piped" }).output();
  const pid = Number(new TextDecoder().decode(out.stdout).trim().split("\n")[0]);
  return pid || undefined;
}

export async function rssKiB(pid: number): Promise<number> {
  const s = await Deno.readTextFile(`/proc/${pid}/status`).catch(() => "");
  return Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0);
}

export async function memAvailableKiB(): Promise<number> {
  return Number(/MemAvailable:\s+(\d+)/.exec(await Deno.readTextFile("/proc/meminfo"))![1]);
}

/** Time of one operator `ps` over the control rail, in ms (or Infinity). */
export async function psMs(root: string): Promise<number> {
  const t0 = performance.now();
  const out = await cotal(["ps", "--root", root, "--json"], 30_000).catch(() => "");
  return out.includes('"name"') ? Math.round(performance.now() - t0) : Infinity;
}
