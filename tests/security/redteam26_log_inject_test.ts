/**
 * Red team 26: any sandboxed agent restarts the shared broker at will, by writing the watchdog's
 * "full disk" words into the broker's log.
 *
 * The watchdog restarts a broker whose log shows a storage fault: it matches
 * `STORAGE_FAULT_RE` (lib/mesh/storage_fault.ts: "no space left on device", "Critical write
 * error", ...) anywhere in any line of `logs/nats-server.log`. nats-server puts a client's
 * CONNECT `name` verbatim in every line it logs about that client, and at the default level it
 * logs each permission violation. So an agent in the default sandbox (a module agent here,
 * `rt26_fixtures/log_inject.js`) dials its relay with its launch creds, sends
 * `CONNECT {"jwt":..., "name":"x: no space left on device"}` (the relay passes the name on) and
 * `PUB not.mine`: the broker logs
 * `[ERR] ... - "x: no space left on device" - ... - Publish Violation - Subject "not.mine"`, and
 * within a quarter second the watchdog logs "the broker cannot write (...); restarting it to
 * resume" and restarts it. Every connection of every space under the root drops, the memory
 * presence bucket is emptied, in-flight requests fail; `cotal status` reports a storage fault
 * the disk never had. The agent dials again after each restart and repeats: the broker restarts
 * again at each backoff (250 ms doubling to 30 s), for as long as the agent runs. (An agent with
 * `--net host` can also listen on the broker's port in the gap of a restart, so the broker
 * cannot come back: see the second test.)
 *
 * Observed 2026-12-05 (Deno 2.9.6, root, `cotal up --detach`): the broker restarted 2 s after the
 * agent's spawn, and again on each try (5 restarts in 20 s).
 *
 * Second test, with a second agent of the same owner on the host's network
 * (`rt26_fixtures/port_squat.pl`, `--net host`): it waits for the broker's port to come free and
 * listens on it (SO_REUSEADDR) in the gap the restart leaves. Observed: the broker never came
 * back (every restart "address already in use", backoff to 30 s, for good); every daemon and
 * every agent's relay dialled the squatter instead and sent it a CONNECT (JWT and a signature of
 * the squatter's nonce): cotal-delivery, cotal-membership-rw, cotal-membership-observer,
 * cotal-signer, cotal-supervise, and the victim's, mallory's and its own runners; the
 * operator's `cotal ps` said the broker "is not running right now, and its watchdog is
 * restarting it"; `cotal down` needed 19.5 s and killed the supervisor and the delivery daemon.
 * Whoever holds the port is the broker every client of the root trusts: what it sends down a
 * connection (MSG frames on any subject, JetStream answers) is not checked by the relay guard,
 * which reads only what agents send up.
 *
 * Third test, the same hole read by another reader: `reloadBroker` (lib/mesh/stack.ts, what
 * `cotal space add` and every re-render run) SIGHUPs the broker and takes the first log line
 * matching /Reloaded server configuration|Failed to reload/ as the outcome. An agent whose
 * connection is named "x: Failed to reload" and that publishes outside its grant ~900 times a
 * second (`rt26_fixtures/reload_inject.js`, within its relay budget; the broker keeps the
 * connection) wins that race: observed, `cotal space add third` failed at once with "nats-server
 * refused the new configuration: Failed to reload\" - \"ACQF.../default/jwt:UCPG...\" - Publish
 * Violation - Subject \"not.mine\"" and was rolled back. The same flood rotates the broker's log
 * (10 MiB x 5) every minute or so, taking the record of the injection with it.
 *
 * Passes when the defence holds: the broker keeps its pid while the agent runs.
 */
import assert from "node:assert/strict";
import { freePort } from "../_harness/broker.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const FIX = `${CHECKOUT}/tests/security/rt26_fixtures`;
const ROOT = "/tmp/cotal-rt26-root-li";
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

async function brokerPid(): Promise<number | undefined> {
  const out = await new Deno.Command("pgrep", {
    args: ["-f", `nats-server -c ${ROOT}/`],
    stdout: "piped",
  }).output();
  return Number(new TextDecoder().decode(out.stdout).trim().split("\n")[0]) || undefined;
}

/** Unmounts what a supervisor killed mid-stop left under `root` (its agents' devpts), then removes it. */
async function removeRoot(root: string): Promise<void> {
  const mounts = (await Deno.readTextFile("/proc/mounts")).split("\n")
    .map((l) => l.split(" ")[1]).filter((m) => m?.startsWith(`${root}/`));
  if (mounts.length) console.log("left mounted after down:", mounts);
  for (const m of mounts) await new Deno.Command("umount", { args: [m] }).output();
  await Deno.remove(root, { recursive: true }).catch(() => {});
}

Deno.test("redteam26 - a sandboxed agent cannot make the watchdog restart the broker by naming its connection after a full disk", async () => {
  await Deno.remove(ROOT, { recursive: true }).catch(() => {});
  const up = await cotal(["up", "--root", ROOT, "--port", PORT, "--detach"], 170_000);
  assert.equal(up.code, 0, up.out);
  try {
    const v = await cotal([
      "spawn",
      "--root",
      ROOT,
      "--agent",
      "program",
      "--name",
      "victim",
      "--",
      "/bin/sleep",
      "600",
    ]);
    assert.equal(v.code, 0, v.out);
    const before = await brokerPid();
    assert.ok(before, "the broker runs");
    const m = await cotal([
      "spawn",
      "--root",
      ROOT,
      "--agent",
      "module",
      "--module",
      `${FIX}/log_inject.js`,
      "--name",
      "mallory",
    ]);
    assert.equal(m.code, 0, m.out);
    const pids = new Set<number>([before!]);
    const end = Date.now() + 20_000;
    while (Date.now() < end) {
      const p = await brokerPid();
      if (p) pids.add(p);
      await new Promise((r) => setTimeout(r, 250));
    }
    const wd = (await Deno.readTextFile(`${ROOT}/logs/watchdog.log`).catch(() => ""))
      .split("\n").filter((l) => l.includes("the broker cannot write"));
    console.log(`broker pids seen in 20 s: ${[...pids].join(", ")}`);
    if (wd.length) console.log("watchdog:", wd[0].slice(0, 260));
    const st = await cotal(["status", "--root", ROOT], 60_000);
    console.log(st.out.split("\n").filter((l) => /storage|cannot write|space/i.test(l)).join("\n"));
    assert.equal(
      pids.size,
      1,
      `the broker was restarted ${
        pids.size - 1
      } time(s) in 20 s (${wd.length} "cannot write" restarts logged by the watchdog)`,
    );
  } finally {
    console.log(
      (await cotal(["down", "--root", ROOT], 120_000)).out.trim().split("\n").slice(-2)
        .join("\n"),
    );
    await removeRoot(ROOT);
  }
});

Deno.test("redteam26 - a --net host agent cannot take the broker's port while the watchdog restarts the broker", async () => {
  const root = "/tmp/cotal-rt26-root-sq";
  const work = "/tmp/cotal-rt26-work-sq";
  const port = String(freePort());
  const brokerOf = async () => {
    const out = await new Deno.Command("pgrep", {
      args: ["-f", `nats-server -c ${root}/`],
      stdout: "piped",
    }).output();
    return Number(new TextDecoder().decode(out.stdout).trim().split("\n")[0]) || undefined;
  };
  await Deno.remove(root, { recursive: true }).catch(() => {});
  await Deno.remove(work, { recursive: true }).catch(() => {});
  await Deno.mkdir(`${work}/a`, { recursive: true });
  await Deno.chmod(work, 0o755);
  await Deno.chown(`${work}/a`, null, 1500000000);
  await Deno.chmod(`${work}/a`, 0o2775);
  await Deno.copyFile(`${FIX}/port_squat.pl`, `${work}/a/port_squat.pl`);
  const up = await cotal(["up", "--root", root, "--port", port, "--detach"], 170_000);
  assert.equal(up.code, 0, up.out);
  try {
    const spawn = async (args: string[]) => {
      const r = await cotal(["spawn", "--root", root, ...args]);
      assert.equal(r.code, 0, r.out);
    };
    await spawn(["--agent", "program", "--name", "victim", "--", "/bin/sleep", "600"]);
    // One owner's two agents: a program on the host's network that waits for the broker's port,
    await spawn([
      "--agent",
      "program",
      "--name",
      "squatter",
      "--net",
      "host",
      "--workdir",
      `${work}/a`,
      "--",
      "/usr/bin/perl",
      `${work}/a/port_squat.pl`,
      port,
      `${work}/a`,
    ]);
    // and a module in the default sandbox that has the watchdog restart the broker.
    await spawn([
      "--agent",
      "module",
      "--module",
      `${FIX}/log_inject.js`,
      "--name",
      "mallory",
    ]);
    await new Promise((r) => setTimeout(r, 15_000));
    const squatted = await Deno.stat(`${work}/a/squatted`).then(() => true, () => false);
    const callers = (await Deno.readTextFile(`${work}/a/connects`).catch(() => ""))
      .split("\n").map((l) => /"name":"([^"]*)"/.exec(l)?.[1]).filter(Boolean);
    console.log("the squatter holds the broker's port:", squatted);
    console.log("CONNECTs the squatter received (JWT and nonce signature each):", callers);
    const ps = await cotal(["ps", "--root", root], 30_000);
    console.log("operator's ps:", ps.out.trim().split("\n").slice(-1)[0]);
    assert.ok(!squatted, "a --net host agent listens on the broker's port");
    assert.ok(await brokerOf(), "the broker is not running 15 s after its restart began");
    assert.equal(ps.code, 0, ps.out);
  } finally {
    console.log(
      (await cotal(["down", "--root", root], 150_000)).out.trim().split("\n").slice(-2)
        .join("\n"),
    );
    await removeRoot(root);
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
});

Deno.test("redteam26 - a sandboxed agent cannot make the operator's space add fail by writing 'Failed to reload' into the broker's log", async () => {
  const root = "/tmp/cotal-rt26-root-rl";
  await removeRoot(root);
  const up = await cotal(["up", "--root", root, "--port", String(freePort()), "--detach"], 170_000);
  assert.equal(up.code, 0, up.out);
  try {
    const m = await cotal([
      "spawn",
      "--root",
      root,
      "--agent",
      "module",
      "--module",
      `${FIX}/reload_inject.js`,
      "--name",
      "mallory",
    ]);
    assert.equal(m.code, 0, m.out);
    // Until its lines are in the broker's log.
    const injected = async () =>
      (await Deno.readTextFile(`${root}/logs/nats-server.log`).catch(() => ""))
        .split("Failed to reload").length - 1;
    const until = Date.now() + 30_000;
    while (Date.now() < until && await injected() < 500) {
      await new Promise((r) => setTimeout(r, 500));
    }
    console.log("injected lines so far:", await injected());
    // `reloadBroker` (lib/mesh/stack.ts) takes the first /Reloaded server configuration|Failed to
    // reload/ line the broker logs after its SIGHUP as the reload's outcome. Three tries.
    const failed: string[] = [];
    for (const space of ["second", "third", "fourth"]) {
      const add = await cotal(["space", "add", space, "--root", root], 150_000);
      console.log(`space add ${space}:`, add.out.trim().split("\n")[0].slice(0, 300));
      if (add.code !== 0) failed.push(`${space}: ${add.out.trim().slice(0, 300)}`);
    }
    assert.deepEqual(failed, [], "the operator's space add failed");
  } finally {
    console.log(
      (await cotal(["down", "--root", root], 150_000)).out.trim().split("\n").slice(-2)
        .join("\n"),
    );
    await removeRoot(root);
  }
});
