/**
 * Red team 27: red team 26's log injection again, from an agent in the default sandbox, through
 * the CONNECT field the relay does not check.
 *
 * Red team 26's fix has the relay drop a CONNECT `name` that is not a plain token of at most 128
 * bytes, and has every log reader match the server's own lines only (`serverLine()`, which
 * refuses a line with the connection prefix). But nats-server writes
 * `"v<version>:<lang>:<name>"` into every line about a connection, and the relay passes
 * `version` and `lang` as the agent sent them, up to the 64 KiB control line. And the log's
 * readers start at byte offsets (the watchdog's first poll and its polls across a rotation, the
 * 256 KiB tail `cotal status` reads, `reloadBroker`'s offset at SIGHUP): when that offset falls
 * inside a connection's line, the fragment after it has no prefix and is taken for a server line.
 *
 * The module agent (`rt27_fixtures/version_flood.js`, default bwrap sandbox, its own uid and
 * network namespace) dials its relay with its launch creds, sends
 * `CONNECT {"jwt":..., "version":"AAAA...(~57 KB)... no space left on device"}` and publishes
 * `PUB not.mine` in batches: every Publish Violation line the broker logs is ~60 KB with the phrase
 * at its end, and the 10 MiB x 5 log rotates several times a second.
 *
 * Observed 2026-12-05 (Deno 2.9.6, root, `cotal up --detach`): within 25 s of the spawn the
 * watchdog logged "the broker cannot write (AAAA...); restarting it to resume" and killed the
 * broker repeatedly (pids 2765, 2833, ...). With `version_reload.js` ("... Failed to reload"),
 * `cotal space add` failed 3 times out of 4 ("nats-server.log showed no line matching
 * ...Reloaded server configuration|Failed to reload... within 10000 ms": the verdict was rotated
 * away before the 20 ms poll read it) and rolled the space back.
 *
 * Passes when the defence holds.
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

async function withAgent(
  root: string,
  fixture: string,
  body: () => Promise<void>,
): Promise<void> {
  const port = String(freePort());
  await removeRoot(root);
  const up = await cotal(["up", "--root", root, "--port", port, "--detach"], 170_000);
  assert.equal(up.code, 0, up.out);
  try {
    const m = await cotal([
      "spawn",
      "--root",
      root,
      "--agent",
      "module",
      "--module",
      `${FIX}/${fixture}`,
      "--name",
      "mallory",
    ]);
    assert.equal(m.code, 0, m.out);
    assert.match(m.out, /bwrap/, "the agent runs in the default sandbox");
    await body();
  } finally {
    await cotal(["despawn", "--root", root, "mallory"], 60_000).catch(() => {});
    console.log(
      (await cotal(["down", "--root", root], 120_000)).out.trim().split("\n").slice(-1).join("\n"),
    );
    await removeRoot(root);
  }
}

Deno.test("redteam27 - a sandboxed agent's CONNECT version cannot make the watchdog restart the broker", async () => {
  const root = "/tmp/cotal-rt27-ver";
  await withAgent(root, "version_flood.js", async () => {
    const before = await brokerPid(root);
    assert.ok(before, "the broker runs");
    const pids = new Set<number>([before!]);
    const end = Date.now() + 30_000;
    while (Date.now() < end) {
      const p = await brokerPid(root);
      if (p) pids.add(p);
      await new Promise((r) => setTimeout(r, 250));
    }
    const wd = (await Deno.readTextFile(`${root}/logs/watchdog.log`).catch(() => ""))
      .split("\n").filter((l) => l.includes("the broker cannot write"));
    if (wd.length) console.log("watchdog:", wd[0].slice(0, 200));
    assert.equal(
      pids.size,
      1,
      `the broker was restarted ${
        pids.size - 1
      } time(s) in 30 s (${wd.length} "cannot write" kills)`,
    );
  });
});

Deno.test("redteam27 - a sandboxed agent's log flood cannot fail the operator's space add", async () => {
  const root = "/tmp/cotal-rt27-rel";
  await withAgent(root, "version_reload.js", async () => {
    await new Promise((r) => setTimeout(r, 5_000));
    const failures: string[] = [];
    for (const space of ["third", "fourth", "fifth"]) {
      const r = await cotal(["space", "add", space, "--root", root], 100_000);
      if (r.code !== 0) failures.push(`${space}: ${r.out.trim().slice(0, 240)}`);
    }
    for (const f of failures) console.log(f);
    assert.equal(failures.length, 0, `${failures.length} of 3 space adds failed`);
  });
});
