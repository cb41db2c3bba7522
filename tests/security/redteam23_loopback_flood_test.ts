/**
 * Red team 23: a hostile `--net host` agent keeps a sibling `--net host` agent off the mesh.
 *
 * Attack: an agent on the host network (`cotal spawn --net host`) sees every loopback listener
 * (`/proc/net/tcp`, `ss -ltn`), among them the loopback relay the supervisor opened for a sibling
 * `--net host` agent (also used for `--isolation deno-only` agents). It opens silent TCP
 * connections to that port as fast as it can (perl, ~3,500 held, re-opened as the relay closes
 * them). The relay accepts at most 20/s past a burst of 40 (`RELAY_CONNECT_RATE`, one budget
 * for every caller of that port) and closes the oldest unproven connection past 16, so its
 * 511-deep accept queue is always full of the attacker's connections: the sibling's own new
 * connection waits behind them (~25 s at 20/s) or is never accepted at all.
 *
 * Observed (2026-12-05, Deno 2.9.6, root supervisor, `cotal up --detach`): the victim's program
 * starts `cotal-mcp` every ~2 s and posts once. Before the flood 8/8 posts answered in
 * 1.3-3.2 s; during the flood 0 of 5 answered (each `cotal-mcp` gave up after ~21-23 s);
 * after the attacker was despawned posts answered again within ~30 s. The supervisor's `ps`
 * kept answering. RELAY_MAX_UNPROVEN (red team 19's fix) is defeated by the shared accept-rate
 * budget and the listen backlog.
 *
 * Passes when the defence holds: the victim still posts while the attacker floods. The
 * defence: a host-network agent reaches no loopback port but its own relay's and DNS
 * (`connect_guard.ts`), so every one of the attacker's connects is refused.
 */
import assert from "node:assert/strict";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const ROOT = "/tmp/rt23root-lf";
// Below the ephemeral range (a fixed port there was once taken by a passing connection).
const PORT = String(freeLowPort());
const WORK = "/tmp/rt23w-lf";
const FIX = `${CHECKOUT}/tests/security/rt23_fixtures`;

function freeLowPort(): number {
  for (let i = 0; i < 200; i++) {
    const port = 21_000 + Math.floor(Math.random() * 2_000);
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch {
      // Taken.
    }
  }
  throw new Error("no free port in 21000-22999");
}

async function cotal(args: string[], timeoutMs = 120_000): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${CHECKOUT}/cmd/cotal.ts`, ...args],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(timeoutMs),
  }).output();
  return new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
}

async function supervisorPorts(): Promise<Set<string>> {
  const ps = new TextDecoder().decode(
    (await new Deno.Command("pgrep", { args: ["-f", `supervise.ts.*${ROOT}`], stdout: "piped" })
      .output()).stdout,
  ).trim().split("\n").filter(Boolean);
  const ss = new TextDecoder().decode(
    (await new Deno.Command("ss", { args: ["-ltnpH"], stdout: "piped" }).output()).stdout,
  );
  const ports = new Set<string>();
  for (const line of ss.split("\n")) {
    if (ps.some((pid) => line.includes(`pid=${pid},`))) {
      const m = /127\.0\.0\.1:(\d+)/.exec(line);
      if (m) ports.add(m[1]);
    }
  }
  return ports;
}

async function lat(): Promise<string[]> {
  return (await Deno.readTextFile(`${WORK}/v/lat`).catch(() => "")).split("\n").filter(Boolean);
}

async function waitUntil(what: string, ms: number, f: () => Promise<boolean>) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return;
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`timed out: ${what}`);
}

Deno.test({
  name: "redteam23 - a --net host agent cannot keep a sibling's loopback relay from accepting it",
  ignore: Deno.uid() !== 0,
}, async () => {
  // A run before this one left its files, owned by that run's agent uids.
  for (const d of [WORK, ROOT]) await Deno.remove(d, { recursive: true }).catch(() => {});
  for (const d of ["v", "a"]) {
    await Deno.mkdir(`${WORK}/${d}`, { recursive: true });
    await Deno.chown(`${WORK}/${d}`, null, 1500000000);
    await Deno.chmod(`${WORK}/${d}`, 0o2775);
  }
  await Deno.chmod(WORK, 0o755);
  await Deno.copyFile(`${FIX}/victim_mcp.ts`, `${WORK}/v/victim_mcp.ts`);
  await Deno.copyFile(`${FIX}/flood.pl`, `${WORK}/a/flood.pl`);
  console.log(await cotal(["up", "--root", ROOT, "--port", PORT, "--detach"], 170_000));
  try {
    const before = await supervisorPorts();
    console.log(
      await cotal([
        "spawn",
        "--root",
        ROOT,
        "--agent",
        "program",
        "--name",
        "victim",
        "--net",
        "host",
        "--workdir",
        `${WORK}/v`,
        "--allow-publish",
        "general",
        "--subscribe",
        "general",
        "--",
        "/bin/sh",
        "-c",
        `exec deno run -A ${WORK}/v/victim_mcp.ts ${WORK}/v`,
      ]),
    );
    const relay = [...await supervisorPorts()].filter((p) => !before.has(p));
    assert.equal(relay.length, 1, `the victim's loopback relay port: ${relay}`);
    await waitUntil(
      "the victim posts before the flood",
      90_000,
      async () => (await lat()).filter((l) => l.endsWith(" ok")).length >= 3,
    );
    console.log("before:", (await lat()).join(" | "));
    await Deno.writeTextFile(`${WORK}/a/port`, `${relay[0]}\n`);
    console.log(
      await cotal([
        "spawn",
        "--root",
        ROOT,
        "--agent",
        "program",
        "--name",
        "mallory",
        "--net",
        "host",
        "--workdir",
        `${WORK}/a`,
        "--",
        "/usr/bin/perl",
        `${WORK}/a/flood.pl`,
        `${WORK}/a/port`,
        `${WORK}/a/stat`,
      ]),
    );
    await new Promise((r) => setTimeout(r, 5_000));
    const mark = (await lat()).length;
    await waitUntil(
      "three victim attempts under the flood",
      150_000,
      async () => (await lat()).length >= mark + 3,
    );
    const during = (await lat()).slice(mark);
    // The attacker rewrites its tally every 20 ms (truncate, then write): a read can land between
    // the two and see nothing (CI did once), so read until it holds a line.
    let stat = "?";
    for (let i = 0; i < 50 && !/\n/.test(stat); i++) {
      stat = await Deno.readTextFile(`${WORK}/a/stat`).catch(() => "?");
      if (!/\n/.test(stat)) await new Promise((r) => setTimeout(r, 50));
    }
    console.log("attacker (opened, held):", stat);
    assert.match(stat, /^0 0\n/, "every connect of the attacker to the sibling's relay is refused");
    console.log("during:", during.join(" | "));
    const ok = during.filter((l) => l.endsWith(" ok")).length;
    assert.ok(
      ok > 0,
      `the victim reached the mesh 0 of ${during.length} times while the attacker flooded its relay`,
    );
  } finally {
    console.log(await cotal(["down", "--root", ROOT], 120_000));
    for (const d of [WORK, ROOT]) await Deno.remove(d, { recursive: true }).catch(() => {});
  }
});
