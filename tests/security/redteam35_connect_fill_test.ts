/**
 * Red team 35, `--net host` under the bind guard (adcaf5b) and the listen ban (5f1b4bb): every
 * ephemeral port taken with connect(2) instead.
 *
 * 5f1b4bb closed red team 34's path (listen(2) on an unbound socket) because "an unbound
 * socket that listens is handed a free ephemeral port where no cgroup hook runs". connect(2) on
 * an unbound socket is handed one the same way (`__inet_hash_connect`), with no hook either, and
 * the agent is still allowed to connect. Every connection to ONE destination needs a source
 * port of its own, so the agent (`rt35_fixtures/connfill.pl tcp <broker port>`, eight
 * processes, ~3,900 sockets each, far under 256 processes x 4,096 descriptors) connects to the
 * broker's own port until the kernel has none left. It sends nothing: the broker closes each
 * after its auth timeout (or at once, "maximum connections exceeded"), the agent never closes
 * its end, and the socket stays in CLOSE_WAIT holding its port. The broker's connection cap
 * does not count them: they are closed on its side.
 *
 * Consequences checked (each asserted as the defence holding):
 *   1. a host process (outside the agent) can still bind port 0 (what the auth service, every
 *      loopback relay, any program on the host does): a port held by a connected socket
 *      without SO_REUSEADDR conflicts with a wildcard bind;
 *   2. the operator's `cotal send` still reaches the broker (every source port towards
 *      127.0.0.1:<broker port> is in one of the agent's 4-tuples: EADDRNOTAVAIL);
 *   3. after a broker crash the watchdog's broker comes back AND is reachable: `cotal despawn`
 *      of the agent works 25 s later.
 * Then recorded (not asserted): whether `cotal down` ends the agent and `up` recovers.
 *
 * The broker's port plays no part: source ports come from the ephemeral range whatever the
 * destination, so the second test moves the namespace's range above the broker's port (as the
 * host's lies above Cotal's 4222, where `cotal up` gives no warning) and sees the same.
 *
 * The stack runs in a network namespace of its own (_netns_stack.ts).
 */
import assert from "node:assert/strict";
import { netnsStack, waitFull } from "./_netns_stack.ts";

const PROBE =
  'socket(my $c, PF_INET, SOCK_STREAM, 0); if (connect($c, pack_sockaddr_in($ARGV[0], inet_aton("127.0.0.1")))) { print "connect ok\\n" } else { print "connect: $!\\n" } socket(my $b, PF_INET, SOCK_STREAM, 0); if (bind($b, pack_sockaddr_in(0, inet_aton("127.0.0.1")))) { print "bind0 ok\\n" } else { print "bind0: $!\\n" }';

async function attack(tag: string, moveRange: boolean) {
  const s = await netnsStack(tag, { team: "rt35", files: ["connfill.pl"], log: "connfill.log" });
  const findings: string[] = [];
  try {
    if (moveRange) {
      // The broker's port (44300-44899) below the namespace's ephemeral range, as Cotal's
      // default 4222 lies below the host's: `cotal up` has nothing to warn about.
      const r = await s.inNs(["sysctl", "-w", "net.ipv4.ip_local_port_range=45000 60999"]);
      assert.equal(r.code, 0, r.out);
    }
    const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
    assert.equal(up.code, 0, up.out);
    console.log("up's warning:", up.out.split("\n").filter((l) => /ephemeral/i.test(l)));
    const bob = await s.cotal(
      ["spawn", "--agent", "program", "--name", "bob", "--", "/bin/sleep", "900"],
    );
    assert.equal(bob.code, 0, bob.out);
    const send0 = await s.cotal(["send", "--as", "alice", "--to", "local.bob", "before"]);
    assert.equal(send0.code, 0, send0.out);
    const m = await s.spawnHostAgent("connfill.pl", [
      `${s.work}/a`,
      "tcp",
      s.port,
    ]);
    assert.equal(m.code, 0, m.out);
    const held = await waitFull(s.work, 240_000);
    const log = await s.readLog();
    console.log(log.trim());
    console.log("ports the agent holds:", held);
    assert.match(log, /bind refused: Operation not permitted/, "the agent runs under the guard");
    assert.match(log, /listen refused: Operation not permitted/, "and under the listen ban");
    const ss = await s.inNs(["ss", "-tanH", "state", "close-wait"]);
    console.log("CLOSE_WAIT sockets in the namespace:", ss.out.trim().split("\n").length);

    const probe = await s.inNs(["/usr/bin/perl", "-MSocket", "-e", PROBE, s.port]);
    console.log("a host process, outside the agent:", probe.out.trim());
    if (!/bind0 ok/.test(probe.out)) findings.push(`host bind(port 0): ${probe.out.trim()}`);
    if (!/connect ok/.test(probe.out)) {
      findings.push(`host connect to the broker: ${probe.out.trim()}`);
    }
    const send = await s.cotal(["send", "--as", "alice", "--to", "local.bob", "held"], 60_000);
    console.log("cotal send while held:", send.code, send.out.trim().slice(-300));
    if (send.code !== 0) findings.push(`cotal send while held: ${send.out.trim().slice(-200)}`);

    // A broker crash: the watchdog restarts it; does anything reach it again?
    const pid = s.brokerPid();
    assert.ok(pid > 0, "the broker runs");
    Deno.kill(pid, "SIGKILL");
    await new Promise((r) => setTimeout(r, 25_000));
    console.log("broker after the crash: pid", s.brokerPid());
    const gone = await s.cotal(["despawn", "mallory"], 90_000);
    console.log("cotal despawn mallory, 25 s after the crash:", gone.code, gone.out.trim());
    if (gone.code !== 0) {
      findings.push(`stack unreachable after a broker crash: ${gone.out.trim().slice(-200)}`);
    }
    // What the operator has left: `cotal down` and `up` again (recorded, not asserted).
    const down = await s.cotal(["down"], 150_000);
    console.log("cotal down:", down.code, down.out.trim().split("\n").slice(-2).join(" | "));
    const left = await s.inNs(["pgrep", "-c", "-f", `${s.work}/a/connfill.pl`]);
    console.log("agent processes left after down:", left.out.trim());
    const up2 = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
    console.log("cotal up again:", up2.code, up2.out.trim().split("\n").slice(-2).join(" | "));
    const send2 = await s.cotal(["send", "--as", "alice", "--to", "local.bob", "after"], 60_000);
    console.log("cotal send after down/up:", send2.code, send2.out.trim().slice(-200));
    const starts = (await s.readLog()).split("\n").filter((l) => /started mode/.test(l));
    console.log("the agent's starts (a second one: `up` brought it back):", starts.length);
    console.log("FINDINGS:\n" + findings.join("\n"));
    assert.deepEqual(findings, [], "the defence holds");
  } finally {
    await s.inNs(["pkill", "-KILL", "-f", `${s.work}/a/connfill.pl`]).catch(() => {});
    await s.close();
  }
}

Deno.test({
  name:
    "red team 35 - a --net host agent cannot take every ephemeral port by connecting (no bind, no listen) and cut the host's binds and the broker's reconnects",
  ignore: Deno.uid() !== 0,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () => attack("cf", false),
});

Deno.test({
  name:
    "red team 35 - the same with the broker's port outside the ephemeral range (as Cotal's 4222): no warning, the same cut (run only with COTAL_SLOW_TESTS=1: the same fill as the test above, kept out of the suite for its time)",
  ignore: Deno.uid() !== 0 || !Deno.env.get("COTAL_SLOW_TESTS"),
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () => attack("cf4222", true),
});
