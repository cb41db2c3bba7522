/**
 * Red team 27: the broker log's readers start at a byte offset, so the "server's own lines only"
 * rule of lib/broker/log_lines.ts (red team 26's fix) is read on a fragment of a connection's line.
 *
 * `serverLine()` refuses a line that carries the connection prefix
 * (`[ERR] 127.0.0.1:5 - cid:7 - ...`), where a client's CONNECT text appears. But every reader of
 * `logs/nats-server.log` starts at an offset into the file and splits from there:
 * - `lastStorageFault` (what `cotal status` prints) reads the last 256 KiB;
 * - the watchdog's `StorageFaultReader` reads the last 256 KiB at its first poll, and after a
 *   rotation reads the new file from its old offset whenever the new file already grew past it;
 * - `reloadBroker` (`cotal space add`) reads from the size the log had at SIGHUP, also across a
 *   rotation, and a reload verdict rotated away is never seen.
 * The first "line" such a reader sees is the tail of whatever line spans the offset. A member
 * whose connection name is 30–60 KB long and ends in "no space left on device" makes every line
 * the broker writes about it that long with the phrase at its end, so the cut almost always lands
 * between the prefix and the phrase: the fragment has no prefix, and matches.
 *
 * A member with its own cred (`cotal mint --profile observer`, any profile) connects to the broker
 * directly, so the relay's connection-name check (a plain token, at most 128 bytes) never sees it;
 * it publishes outside its grant and the broker logs one `Publish Violation` line per publish.
 *
 * Observed 2026-12-05 (Deno 2.9.6, root, `cotal up --detach`, nats-server 2.15.1):
 * - 20 such publishes (30 KB name, a 600 KB log): `cotal status` printed "broker cannot write:
 *   AAAA... no space left on device" ... (the watchdog restarts it)" on a healthy broker.
 * - the same member publishing in a loop for 20 s (60 KB name): the broker log rotated (10 MiB x 5)
 *   every ~25 ms, and the watchdog logged "the broker cannot write (AAAA...); restarting it to
 *   resume" and killed the broker, twice in 10 s and again at each backoff while it lasted; every
 *   connection of every space dropped. The broker's earlier log history was purged with it.
 *
 * Each test passes when the defence holds.
 */
import assert from "node:assert/strict";
import { freePort } from "../_harness/broker.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const FIX = `${CHECKOUT}/tests/security/rt27_fixtures`;

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

async function run(args: string[], timeoutMs: number): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", ...args],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(timeoutMs),
  }).output();
  return new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
}

async function brokerPid(root: string): Promise<number | undefined> {
  const out = await new Deno.Command("pgrep", {
    args: ["-f", `nats-server -c ${root}/`],
    stdout: "piped",
  }).output();
  return Number(new TextDecoder().decode(out.stdout).trim().split("\n")[0]) || undefined;
}

async function removeRoot(root: string): Promise<void> {
  const mounts = (await Deno.readTextFile("/proc/mounts")).split("\n")
    .map((l) => l.split(" ")[1]).filter((m) => m?.startsWith(`${root}/`));
  for (const m of mounts) await new Deno.Command("umount", { args: [m] }).output();
  await Deno.remove(root, { recursive: true }).catch(() => {});
}

/** A fresh stack and an observer cred minted for a member; `body` gets its url and creds. */
async function withStack(
  root: string,
  body: (url: string, creds: string) => Promise<void>,
): Promise<void> {
  const port = String(freePort());
  await removeRoot(root);
  const up = await cotal(["up", "--root", root, "--port", port, "--detach"], 170_000);
  assert.equal(up.code, 0, up.out);
  try {
    const creds = `${root}/member.creds`;
    const m = await cotal(["mint", "--root", root, "--profile", "observer", "--out", creds]);
    assert.equal(m.code, 0, m.out);
    await body(`nats://127.0.0.1:${port}`, creds);
  } finally {
    console.log(
      (await cotal(["down", "--root", root], 120_000)).out.trim().split("\n").slice(-1).join("\n"),
    );
    await removeRoot(root);
  }
}

Deno.test("redteam27 - a member's long connection name cannot make cotal status report a full disk", async () => {
  const root = "/tmp/cotal-rt27-tail";
  await withStack(root, async (url, creds) => {
    // 20 violation lines of ~30 KB each: the log is past the 256 KiB status reads.
    console.log(
      (await run([`${FIX}/log_tail_flood.ts`, url, creds, "20", "30000"], 60_000)).trim(),
    );
    const st = await cotal(["status", "--root", root, "--json"], 60_000);
    const fault = /"brokerFault"\s*:\s*"([^"]{0,80})/.exec(st.out);
    if (fault) console.log(`status brokerFault: ${fault[1]}...`);
    assert.ok(!fault, "cotal status reports a storage fault on a healthy broker");
  });
});

Deno.test("redteam27 - a member's long connection name cannot make the watchdog restart the broker", async () => {
  const root = "/tmp/cotal-rt27-wd";
  await withStack(root, async (url, creds) => {
    const before = await brokerPid(root);
    assert.ok(before, "the broker runs");
    const pids = new Set<number>([before!]);
    const flood = run([`${FIX}/log_flood_for.ts`, url, creds, "20", "60000"], 60_000);
    const end = Date.now() + 22_000;
    while (Date.now() < end) {
      const p = await brokerPid(root);
      if (p) pids.add(p);
      await new Promise((r) => setTimeout(r, 250));
    }
    console.log((await flood).trim().split("\n").slice(-1).join(""));
    const wd = (await Deno.readTextFile(`${root}/logs/watchdog.log`).catch(() => ""))
      .split("\n").filter((l) => l.includes("the broker cannot write"));
    if (wd.length) console.log("watchdog:", wd[0].slice(0, 200));
    assert.equal(
      pids.size,
      1,
      `the broker was restarted ${pids.size - 1} time(s) (${wd.length} "cannot write" kills)`,
    );
  });
});
