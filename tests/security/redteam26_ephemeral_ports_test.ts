/**
 * Red team 26: a `--net host` agent holds every ephemeral port of the host's network namespace.
 *
 * Attack: a `--net host` program agent shares the host's ports. Its limits allow 256 processes of
 * 4,096 descriptors each, so eight processes bind (and listen on) all 28,232 ports of
 * `ip_local_port_range` on 0.0.0.0 (`rt26_fixtures/bind_ports.pl`). On kernels that skip a bound
 * port when choosing a connect()'s source port, nothing on the host can then open an outgoing TCP
 * connection: the operator's `cotal` CLI, the supervisor's relay dialling the broker for a new
 * agent, the daemons' reconnects, the watchdog's broker probe.
 *
 * The stack runs in a network namespace of its own (`unshare --net`, every `cotal` through
 * `nsenter --net`), so the attack cannot touch anything else on this shared machine: inside it
 * the agent's "host network" is that namespace.
 *
 * Observed 2026-12-05 (kernel 6.18, Deno 2.9.6, root): HELD. The agent held 28,216 of 28,232
 * ports (listening), and connect() still found source ports (the kernel reuses a port bound by
 * another socket when the 4-tuple is unique): `cotal ps` answered and a new relay-mode spawn
 * came up. On an older kernel this may differ; the test asserts what the operator needs.
 */
import assert from "node:assert/strict";
import { freePort } from "../_harness/broker.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const FIX = `${CHECKOUT}/tests/security/rt26_fixtures`;
const ROOT = "/tmp/cotal-rt26-root-ep";
const WORK = "/tmp/cotal-rt26-work-ep";
const PORT = String(freePort());

Deno.test("redteam26 - a --net host agent holding every ephemeral port does not cut the operator or new agents off the broker", async () => {
  const holder = new Deno.Command("unshare", {
    args: ["--net", "sleep", "900"],
    stdout: "null",
    stderr: "null",
  }).spawn();
  const ns = `--net=/proc/${holder.pid}/ns/net`;
  const inNs = async (cmd: string[], timeoutMs = 120_000) => {
    const out = await new Deno.Command("nsenter", {
      args: [ns, ...cmd],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(timeoutMs),
    }).output();
    return {
      code: out.code,
      out: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr),
    };
  };
  const cotal = (args: string[], timeoutMs = 120_000) =>
    inNs([Deno.execPath(), "run", "-A", `${CHECKOUT}/cmd/cotal.ts`, ...args], timeoutMs);
  try {
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await inNs(["ip", "link", "set", "lo", "up"])).code, 0);
    await Deno.remove(WORK, { recursive: true }).catch(() => {});
    await Deno.mkdir(`${WORK}/a`, { recursive: true });
    await Deno.chmod(WORK, 0o755);
    await Deno.chown(`${WORK}/a`, null, 1500000000);
    await Deno.chmod(`${WORK}/a`, 0o2775);
    await Deno.copyFile(`${FIX}/bind_ports.pl`, `${WORK}/a/bind_ports.pl`);
    const up = await cotal(["up", "--root", ROOT, "--port", PORT, "--detach"], 170_000);
    assert.equal(up.code, 0, up.out);
    const m = await cotal([
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
      `${WORK}/a/bind_ports.pl`,
      `${WORK}/a/held`,
    ]);
    assert.equal(m.code, 0, m.out);
    // Wait until the agent holds (nearly) the whole range.
    let held = 0;
    const end = Date.now() + 60_000;
    while (Date.now() < end) {
      held = 0;
      for await (const e of Deno.readDir(`${WORK}/a`)) {
        if (/^held\.\d+$/.test(e.name)) {
          held += Number((await Deno.readTextFile(`${WORK}/a/${e.name}`)).trim()) || 0;
        }
      }
      if (held > 28_000) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
    console.log("ports the agent holds:", held);
    // The operator's CLI and a new agent behind its relay still reach the broker.
    const ps = await cotal(["ps", "--root", ROOT], 60_000);
    assert.equal(ps.code, 0, `cotal ps failed while the ports were held: ${ps.out.slice(-400)}`);
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
    ], 90_000);
    assert.equal(v.code, 0, `a new spawn failed while the ports were held: ${v.out.slice(-400)}`);
  } finally {
    console.log(
      (await cotal(["down", "--root", ROOT], 120_000).catch((e) => ({ out: String(e) })))
        .out.trim().split("\n").slice(-2).join("\n"),
    );
    try {
      holder.kill("SIGKILL");
    } catch {
      // Gone.
    }
    await holder.status;
    await Deno.remove(ROOT, { recursive: true }).catch(() => {});
    await Deno.remove(WORK, { recursive: true }).catch(() => {});
  }
});
