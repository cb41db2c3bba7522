/**
 * Red team 48: a local unprivileged process fills the auth service's file table.
 *
 * The auth service's HTTP face is `Deno.serve` on loopback with no bound on the connections it
 * holds, and the same process answers the broker's auth callout and reads the ledger file at
 * every connect and every supervisor request. Any local process (here: perl as `nobody`, two
 * of them so that each stays under its own open-file limit) opens idle TCP connections to the
 * port until the daemon's descriptors run out (its soft limit, which Deno raises to the hard
 * one). Then the daemon can accept nothing and open no file: promise 5 says no local process
 * can stop the supervisor from getting bearers for its agents, or stop agents (re)connecting.
 *
 * Passes when the defence holds: while the attacker holds its connections, the supervisor
 * still gets a bearer and a client still connects through the callout.
 */
import assert from "node:assert/strict";
import { ask, OPEN_GRANT, startRt48, uid } from "./_rt48.ts";

const PERL = `
use strict; use IO::Socket::INET;
my ($port, $n) = @ARGV; my @s; my $fail = 0;
while (@s < $n && $fail < 20) {
  my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 1);
  if ($c) { push @s, $c; } else { $fail++; }
}
print "held ", scalar(@s), "\\n"; STDOUT->flush();
sleep 600;
`;

function fdLimit(pid: number): number {
  const line = Deno.readTextFileSync(`/proc/${pid}/limits`).split("\n").find((l) =>
    l.startsWith("Max open files")
  )!;
  return Number(line.trim().split(/\s+/)[3]);
}

function fdCount(pid: number): number | string {
  let n = 0;
  try {
    for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) n++;
  } catch {
    return "gone (the daemon exited)";
  }
  return n;
}

Deno.test({
  name:
    "redteam48 fd fill - a local process holding idle connections to the auth service does not stop bearers or callout connects",
  // The refused connect's socket is reset by the broker after the test's await ends.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const onError = (e: ErrorEvent) => {
      if (/ECONNRESET|EPIPE/.test(String(e.error))) e.preventDefault();
    };
    globalThis.addEventListener("error", onError);
    const t = await startRt48();
    const attackers: Deno.ChildProcess[] = [];
    try {
      const { mesh, svc } = t;
      const url = svc.discovery.url;
      const port = Number(new URL(url).port);
      const pid = svc.child.pid;
      const life = uid();
      assert.equal(
        (await ask(
          url,
          { op: "grant", actor: "worker", lifecycleUid: life, grant: OPEN_GRANT },
          t
            .supervisor,
        )).status,
        200,
      );
      // Before the attack both work.
      const issued = await mesh.issuer.issue({
        space: mesh.space,
        owner: t.owner,
        actor: "worker",
        scope: [],
        lifecycleUid: life,
        ttlSec: 300,
      });
      const tryConnect = () =>
        mesh.connectUser(issued.token).then(
          async (nc) => {
            await nc.close();
            return "connected";
          },
          (e) => `refused: ${(e as Error).message}`,
        );
      assert.equal(
        await tryConnect(),
        "connected",
        "the callout admits the agent before the attack",
      );
      assert.equal(
        (await ask(url, { op: "bearer", actor: "worker", lifecycleUid: life }, t.supervisor))
          .status,
        200,
      );
      const limit = fdLimit(pid);
      const need = limit - (fdCount(pid) as number) + 200;
      console.log(`daemon pid ${pid}: open-file limit ${limit}, ${fdCount(pid)} open`);
      // Each attacker stays under its own limit (the same as the daemon's).
      const per = Math.ceil(need / 2);
      const script = await Deno.makeTempFile({ suffix: ".pl" });
      await Deno.writeTextFile(script, PERL);
      await Deno.chmod(script, 0o644);
      for (let i = 0; i < 2; i++) {
        attackers.push(
          new Deno.Command("setpriv", {
            args: [
              "--reuid=65534",
              "--regid=65534",
              "--clear-groups",
              "perl",
              script,
              String(port),
              String(per),
            ],
            stdout: "piped",
            stderr: "inherit",
          }).spawn(),
        );
      }
      const readers = attackers.map(async (a) => {
        const r = a.stdout.pipeThrough(new TextDecoderStream()).getReader();
        const { value } = await r.read();
        r.releaseLock();
        return value ?? "";
      });
      const held = await Promise.race([
        Promise.all(readers),
        new Promise<string[]>((r) => setTimeout(() => r(["timeout"]), 180_000)),
      ]);
      console.log(`attackers: ${held.map((h) => h.trim()).join(", ")}; daemon fds ${fdCount(pid)}`);

      // Under attack: the supervisor renews its agent's bearer, a human exchanges and connects.
      const bearer = await ask(
        url,
        { op: "bearer", actor: "worker", lifecycleUid: life },
        t.supervisor,
        { timeoutMs: 10_000 },
      ).catch((e) => ({ status: 0, body: { error: String(e) }, ms: 10_000 }));
      console.log(
        `supervisor bearer under attack: ${bearer.status} ${
          JSON.stringify(bearer.body).slice(0, 160)
        }`,
      );
      // The callout: a bearer the issuer signed before the attack (what the relay holds).
      const conn = await tryConnect();
      console.log(`callout connect under attack: ${conn}`);
      console.log(`daemon's last events: ${JSON.stringify(svc.events.slice(-3))}`);
      console.log(`daemon's stderr text: ${svc.text.slice(-3).join(" | ").slice(0, 600)}`);
      const alive = (() => {
        try {
          return Deno.readTextFileSync(`/proc/${pid}/stat`).split(" ")[2] !== "Z";
        } catch {
          return false;
        }
      })();
      console.log(`daemon fds ${fdCount(pid)}; alive: ${alive}`);
      assert.ok(alive, "the auth service died: a local process's idle connections ended it");
      assert.equal(
        bearer.status,
        200,
        "the supervisor got no bearer while a local process held fds",
      );
      assert.equal(conn, "connected", "an agent could not connect while a local process held fds");
    } finally {
      for (const a of attackers) {
        try {
          a.kill("SIGKILL");
        } catch {
          // Gone.
        }
        await a.status;
        await a.stdout.cancel().catch(() => {});
      }
      await t.close();
      globalThis.removeEventListener("error", onError);
    }
  },
});
