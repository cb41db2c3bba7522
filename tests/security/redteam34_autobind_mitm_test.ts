/**
 * Red team 34, `--net host` under the bind guard: red team 33's man-in-the-middle of every
 * daemon's broker session, with the broker's port taken by listen(2) on UNBOUND sockets.
 *
 * The guard (adcaf5b) refuses bind(2); a socket that listens without one is given a port by the
 * kernel, from the ephemeral range, with no cgroup hook on the way. The agent
 * (`rt34_fixtures/autobind.pl mitm`) first holds every free port of the range from eight
 * processes, so the kernel has exactly one port left to hand out the moment the broker dies: the
 * broker's, when it lies in that range (`cotal up` only warns, 435f08d; every port this run may
 * use, 46000-46999, lies there, as would any `--port` in 32768-60999). It keeps calling listen()
 * until that port is what it gets, lets the fillers go, holds every daemon that redials for
 * 1.5 s, releases the port so the watchdog's broker can bind it, and splices each held client
 * onto the real broker (the client signs the real nonce): in the delivery daemon's session it
 * publishes `$JS.API.STREAM.PURGE.DM_default`.
 *
 * Observed 2026-12-05 (kernel 6.18, root): the MITM itself is REFUSED, by the kernel rather
 * than by Cotal: the dead broker's accepted sockets sit in TIME_WAIT on its port, and an
 * autobind (relax=false unless net.ipv4.ip_autobind_reuse) refuses a port any socket still
 * holds, while nats-server's explicit SO_REUSEADDR bind takes it. But the agent's sniper keeps
 * every port that comes free, and a crash frees exactly the source ports of every daemon's,
 * relay's and CLI's connection: nothing in the namespace (the host's, for a real `--net host`
 * agent) can open a TCP connection again (connect EINVAL / EADDRNOTAVAIL), so the broker comes
 * back and no daemon, relay or `cotal` command reaches it: the stack does not come back.
 *
 * The stack runs in a network namespace of its own. Passes when the defence holds: the agent
 * never holds the broker's port, no daemon session is authenticated through it, the operator
 * reaches the broker again 25 s after the crash, and the DMs stored before it are all there.
 */
import assert from "node:assert/strict";
import { netnsStack, waitFull } from "./_netns_stack.ts";

Deno.test({
  name:
    "red team 34 - a --net host agent cannot take the broker's port by listening unbound and sit in a daemon's session",
  ignore: Deno.uid() !== 0,
  async fn() {
    const s = await netnsStack("mitm", {
      team: "rt34",
      files: ["autobind.pl"],
      log: "autobind.log",
    });
    // Counted from inside the namespace: a small Deno script with the admin creds.
    const dmCount = async () => {
      const m = await s.cotal(["mint", "--profile", "admin", "--json"]);
      assert.equal(m.code, 0, m.out);
      const j = JSON.parse(m.out.slice(m.out.indexOf("{")));
      await Deno.writeTextFile(`${s.work}/admin.json`, JSON.stringify(j));
      const r = await s.inNs([
        Deno.execPath(),
        "eval",
        `const j = JSON.parse(Deno.readTextFileSync(${JSON.stringify(`${s.work}/admin.json`)}));
         const { connect } = await import(${
          JSON.stringify(import.meta.resolve("../../lib/nats/mod.ts"))
        });
         const { credsAuthenticatorFast } = await import(${
          JSON.stringify(import.meta.resolve("../../lib/trust/mod.ts"))
        });
         const nc = await connect({ servers: "nats://127.0.0.1:${s.port}", authenticator: credsAuthenticatorFast(j.creds), inboxPrefix: j.inboxPrefix, timeout: 10000 });
         console.log("DM=" + (await (await nc.jetstreamManager()).streams.info("DM_default")).state.messages);
         await nc.close();`,
      ], 60_000);
      const got = /DM=(\d+)/.exec(r.out);
      assert.ok(got, r.out);
      return Number(got[1]);
    };
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      console.log(up.out.split("\n").filter((l) => /ephemeral/i.test(l)).join("\n"));
      const bob = await s.cotal(
        ["spawn", "--agent", "program", "--name", "bob", "--", "/bin/sleep", "900"],
      );
      assert.equal(bob.code, 0, bob.out);
      for (let i = 0; i < 3; i++) {
        const r = await s.cotal(["send", "--as", "alice", "--to", "local.bob", `private ${i}`]);
        assert.equal(r.code, 0, r.out);
      }
      // Counted before the fill: while it holds the range, a new connection may find no port.
      const before = await dmCount();
      assert.equal(before, 3);
      const m = await s.spawnHostAgent("autobind.pl", [
        `${s.work}/a`,
        "mitm",
        s.port,
        "1500",
        "$JS.API.STREAM.PURGE.DM_default",
      ]);
      assert.equal(m.code, 0, m.out);
      const held = await waitFull(s.work, 240_000);
      console.log("ports the agent holds:", held);
      // A broker crash (any crash): the watchdog restarts it.
      const pid = s.brokerPid();
      assert.ok(pid > 0, "the broker runs");
      Deno.kill(pid, "SIGKILL");
      await new Promise((r) => setTimeout(r, 25_000));
      const log = await s.readLog();
      console.log(log.trim().split("\n").filter((l) => !/took \d+ \(not/.test(l)).join("\n"));
      assert.match(log, /bind refused: Operation not permitted/, `the attack ran:\n${log}`);
      assert.doesNotMatch(log, /squatted/, "the agent never holds the broker's port");
      const authed = log.split("\n").filter((l) => /PONG \(authenticated\)/.test(l));
      assert.deepEqual(authed, [], "no daemon session is authenticated through the agent");
      // The stack came back: the operator reaches the broker again (and removes the agent).
      const gone = await s.cotal(["despawn", "mallory"]);
      console.log("cotal despawn mallory, 25 s after the crash:", gone.code, gone.out.trim());
      assert.equal(gone.code, 0, `the stack did not come back after the crash: ${gone.out}`);
      const after = await dmCount();
      console.log(`DMs for bob: ${before} before the crash, ${after} after`);
      assert.equal(after, before, "the DMs stored before the crash are all there");
    } finally {
      // The agent's processes, if the operator could not despawn it (matched by this run's path).
      await s.inNs(["pkill", "-KILL", "-f", `${s.work}/a/autobind.pl`]).catch(() => {});
      await s.close();
    }
  },
});
