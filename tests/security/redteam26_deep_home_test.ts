/**
 * Red team 26: a deno-only agent crashes its supervisor for good with a deep directory tree.
 *
 * Attack: under `cotal up --isolation deno-only` an agent's home is a host directory,
 * `<root>/agents/<space>/<name>/home`, in its Deno write scope. With nothing but `Deno.mkdir` and
 * `Deno.rename` (every path it names under PATH_MAX: chains of 1,500 levels nested by renaming one
 * into the bottom of the next) it builds a tree ~30,000 levels deep in 4 s
 * (`rt26_fixtures/deep_home.js`), then throws. Its runner's exit is a crash; with `--restarts 0`
 * the supervisor retires it and tears it down: `removeAgentDir` calls
 * `Deno.remove(dir, { recursive: true })`, whose recursion overflows the stack of a tokio worker
 * thread, and the whole supervisor aborts ("thread 'tokio-runtime-worker' has overflowed its
 * stack / fatal runtime error: stack overflow, aborting"). The 10 s deadline around the remove
 * does not help: the process is gone. The same happens on the operator's `cotal despawn`, on a
 * `down`, and at every supervisor start (the roster sweep removes each kept agent's dir), so:
 *
 * - every sibling agent's runner stops (its control line drops with the supervisor);
 * - the watchdog restarts the supervisor, which aborts in its roster sweep, in a loop (backoff to
 *   30 s);
 * - `cotal down` then `cotal up` fails: "cotal-supervise did not become ready (... exited during
 *   start-up); last log lines: ... stack overflow, aborting", until the operator finds and
 *   removes the tree by hand.
 *
 * Observed 2026-12-05 (Deno 2.9.6, root, `cotal up --detach --isolation deno-only`): exactly that
 * (8 aborts in the first minute, the sibling's runner gone, the next `up` refused).
 *
 * Passes when the defence holds: after the agent's crash the supervisor is the same process, the
 * sibling still runs, and a `down` then `up` brings back a supervisor that answers.
 */
import assert from "node:assert/strict";
import { freePort } from "../_harness/broker.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const FIX = `${CHECKOUT}/tests/security/rt26_fixtures`;
const ROOT = "/tmp/cotal-rt26-root-dh";
const PORT = String(freePort());

async function cotal(args: string[], timeoutMs = 120_000): Promise<{ code: number; out: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${CHECKOUT}/cmd/cotal.ts`, ...args],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(timeoutMs),
  }).output();
  return {
    code: out.code,
    out: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr),
  };
}

async function supervisorPid(): Promise<number | undefined> {
  const out = await new Deno.Command("pgrep", {
    args: ["-f", `${ROOT}/secrets.*cmd/supervise.ts`],
    stdout: "piped",
  }).output();
  const pids = new TextDecoder().decode(out.stdout).trim().split("\n").filter(Boolean).map(Number);
  return pids[0];
}

function alive(pid: number): boolean {
  try {
    Deno.statSync(`/proc/${pid}`);
    return true;
  } catch {
    return false;
  }
}

async function waitUntil(what: string, ms: number, f: () => Promise<boolean>): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return true;
    await new Promise((r) => setTimeout(r, 500));
  }
  console.log(`(not seen within ${ms} ms: ${what})`);
  return false;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** GNU rm walks a tree of any depth (fts); Deno's recursive remove is what the attack breaks. */
async function rmTree(path: string): Promise<void> {
  await new Deno.Command("rm", { args: ["-rf", path], signal: AbortSignal.timeout(120_000) })
    .output().catch(() => {});
}

Deno.test("redteam26 - a deno-only agent's deep home does not crash its supervisor at teardown, nor every start after", async () => {
  await rmTree(ROOT);
  const up = await cotal(
    ["up", "--root", ROOT, "--port", PORT, "--detach", "--isolation", "deno-only"],
    170_000,
  );
  assert.equal(up.code, 0, up.out);
  try {
    const spawn = (name: string, module: string, extra: string[] = []) =>
      cotal([
        "spawn",
        "--root",
        ROOT,
        "--agent",
        "module",
        "--module",
        `${FIX}/${module}`,
        "--name",
        name,
        // As root deno-only runs only agents trusted with root; the teardown must hold anyway.
        "--trusted",
        ...extra,
      ]);
    const v = await spawn("victim", "sleeper.js");
    assert.equal(v.code, 0, v.out);
    const sup = await supervisorPid();
    assert.ok(sup, "the supervisor runs");
    const m = await spawn("mallory", "deep_home.js", ["--restarts", "0"]);
    assert.equal(m.code, 0, m.out);
    // The tree is built (the agent says so in its home), then the agent throws.
    const built = await waitUntil("mallory's tree", 60_000, async () => {
      for await (const d of Deno.readDir(`${ROOT}/agents`)) {
        if (await exists(`${ROOT}/agents/${d.name}/mallory/home/built`)) return true;
      }
      return false;
    });
    console.log("tree built:", built);
    // Its crash is answered: retired and torn down (or the supervisor is gone).
    await waitUntil("mallory retired or the supervisor gone", 60_000, async () => {
      if (!alive(sup!)) return true;
      const ps = await cotal(["ps", "--root", ROOT, "--json"], 30_000);
      return /"name":\s*"mallory"[^}]*"status":\s*"retired"/.test(ps.out) ||
        !ps.out.includes('"mallory"');
    });
    await new Promise((r) => setTimeout(r, 3_000));
    const log = await Deno.readTextFile(
      (await Array.fromAsync(Deno.readDir(`${ROOT}/logs`)))
        .map((e) => `${ROOT}/logs/${e.name}`)
        .find((p) => p.includes("/supervise."))!,
    ).catch(() => "");
    const aborts = log.split("\n").filter((l) => l.includes("overflowed its stack")).length;
    console.log("supervisor aborts in its log:", aborts);
    assert.ok(
      alive(sup!),
      `the supervisor (pid ${sup}) died when it tore down mallory's dir (${aborts} stack-overflow aborts logged)`,
    );
    const ps = await cotal(["ps", "--root", ROOT, "--json"], 60_000);
    assert.match(ps.out, /"name":\s*"victim"[^}]*"status":\s*"running"/, ps.out.slice(0, 400));
    // The operator's next down and up finish with a supervisor that answers.
    const down = await cotal(["down", "--root", ROOT], 120_000);
    console.log(down.out.trim().split("\n").slice(-6).join("\n"));
    const again = await cotal(
      ["up", "--root", ROOT, "--port", PORT, "--detach", "--isolation", "deno-only"],
      170_000,
    );
    assert.equal(again.code, 0, `the next up failed: ${again.out.slice(-600)}`);
    assert.doesNotMatch(again.out, /did not become ready/, again.out.slice(-600));
  } finally {
    console.log(
      (await cotal(["down", "--root", ROOT], 120_000)).out.trim().split("\n").slice(-3)
        .join("\n"),
    );
    await rmTree(ROOT);
  }
});
