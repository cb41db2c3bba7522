/**
 * Red team 33, `--net host`: the broker's port taken across a watchdog restart, then given back
 * so that the agent sits in the middle of the daemons' own authenticated sessions.
 *
 * Attack (`rt33_fixtures/mitm.ts`, run by `/usr/bin/deno` as a `--net host` program agent):
 * bind 127.0.0.1:<broker port> in a loop. When the broker dies (here: SIGKILL, standing for any
 * crash), the agent's bind wins; every daemon, the supervisor and every agent's relay redial
 * and are accepted by the agent, which sends them nothing. After 1.5 s it closes its listener,
 * the watchdog's next nats-server binds the port, and for each held client the agent dials the
 * REAL broker, hands the client the real INFO (nonce included), and carries the client's
 * CONNECT up: the daemon signs the real broker's nonce with its own key, and the session the
 * broker authenticates is the daemon's, with the agent's bytes in the middle. In the delivery
 * daemon's session it then publishes `$JS.API.STREAM.PURGE.DM_default`, a right only the
 * delivery daemon (and teardown) holds.
 *
 * Passes when the defence holds: the agent's bind is refused (its group carries the bind guard,
 * `lib/manager/sandbox/bind_guard.ts`), no daemon session is authenticated through it, and the
 * DMs stored before the restart are still there. The broker's port is below the ephemeral
 * range, as `cotal up` asks: there a socket that listens unbound never lands.
 */
import assert from "node:assert/strict";
import { connect } from "../../lib/nats/mod.ts";
import { credsAuthenticatorFast } from "../../lib/trust/mod.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

/** A free loopback port below the ephemeral range (20000-29999). */
function portBelowEphemeral(): number {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch {
      // Taken: another.
    }
  }
}

function brokerPid(root: string): number {
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const cmd = Deno.readTextFileSync(`/proc/${e.name}/cmdline`).split("\0");
      if (cmd[0].endsWith("nats-server") && cmd.includes(`${root}/broker/nats.conf`)) {
        return Number(e.name);
      }
    } catch {
      // Gone.
    }
  }
  return 0;
}

Deno.test({
  name:
    "red team 33 - a --net host agent cannot take the broker's port across a restart and sit in a daemon's session",
  ignore: Deno.uid() !== 0,
  async fn() {
    const base = await tempDir("cotal-rt33-");
    const root = `${base}/root`;
    const work = `${base}/work`;
    const port = String(portBelowEphemeral());
    const cotal = async (args: string[]) => {
      const end = args.indexOf("--");
      const a = end < 0
        ? [...args, "--root", root]
        : [...args.slice(0, end), "--root", root, ...args.slice(end)];
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", `${CHECKOUT}/cmd/cotal.ts`, ...a],
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(170_000),
      }).output();
      const dec = new TextDecoder();
      return { code: out.code, out: dec.decode(out.stdout) + dec.decode(out.stderr) };
    };
    const dmCount = async () => {
      const m = await cotal(["mint", "--profile", "admin", "--json"]);
      assert.equal(m.code, 0, m.out);
      const j = JSON.parse(m.out.slice(m.out.indexOf("{")));
      const nc = await connect({
        servers: `nats://127.0.0.1:${port}`,
        authenticator: credsAuthenticatorFast(j.creds),
        inboxPrefix: j.inboxPrefix,
      });
      try {
        return (await (await nc.jetstreamManager()).streams.info("DM_default")).state.messages;
      } finally {
        await nc.close();
      }
    };
    await Deno.mkdir(`${work}/m`, { recursive: true });
    await Deno.chmod(base, 0o755);
    await Deno.chmod(work, 0o755);
    // The agent's uid is not known before the spawn: a group-writable dir its gid reaches.
    await Deno.chown(`${work}/m`, null, 1500000000);
    await Deno.chmod(`${work}/m`, 0o2777);
    await Deno.copyFile(`${CHECKOUT}/tests/security/rt33_fixtures/mitm.ts`, `${work}/m/mitm.ts`);
    try {
      const up = await cotal(["up", "--port", port, "--detach"]);
      assert.equal(up.code, 0, up.out);
      const bob = await cotal([
        "spawn",
        "--agent",
        "program",
        "--name",
        "bob",
        "--",
        "/bin/sleep",
        "900",
      ]);
      assert.equal(bob.code, 0, bob.out);
      // DMs kept for bob (a program agent's runner does not read DMs).
      for (let i = 0; i < 3; i++) {
        const s = await cotal(["send", "--as", "alice", "--to", "local.bob", `private note ${i}`]);
        assert.equal(s.code, 0, s.out);
      }
      const m = await cotal([
        "spawn",
        "--agent",
        "program",
        "--name",
        "mallory",
        "--net",
        "host",
        "--workdir",
        `${work}/m`,
        "--",
        "/usr/bin/deno",
        "run",
        "-A",
        `${work}/m/mitm.ts`,
        port,
        `${work}/m`,
        "1500",
        "$JS.API.STREAM.PURGE.DM_default",
      ]);
      assert.equal(m.code, 0, m.out);
      await new Promise((r) => setTimeout(r, 3000));
      const before = await dmCount();
      assert.equal(before, 3);
      // A broker crash: the watchdog restarts it.
      const pid = brokerPid(root);
      assert.ok(pid > 0, "the broker runs");
      Deno.kill(pid, "SIGKILL");
      await new Promise((r) => setTimeout(r, 20_000));
      const log = await Deno.readTextFile(`${work}/m/mitm.log`).catch(() => "");
      assert.match(log, /bind refused: PermissionDenied/, `the attack ran:\n${log}`);
      assert.doesNotMatch(log, /squatted/, log);
      const authed = log.split("\n").filter((l) => /PONG \(authenticated\)/.test(l));
      assert.deepEqual(authed, [], "no daemon session is authenticated through the agent");
      assert.equal(await dmCount(), before, "the DMs stored before the restart are all there");
    } finally {
      await cotal(["down"]).catch(() => {});
      await removeTempDir(base);
    }
  },
});
