/**
 * The bind guard of an agent on the host's network (`lib/manager/sandbox/bind_guard.ts`): in
 * its group every IPv4 and IPv6 `bind(2)` is refused, while connecting out, unix sockets and a
 * socket that listens unbound (an ephemeral port) still work; and without a group to carry the
 * guard, `--net host` is refused rather than run unguarded. The attack it answers is red team
 * 33's (`tests/security/redteam33_port_mitm_test.ts`).
 */
import assert from "node:assert/strict";
import {
  createAgentCgroup,
  probeCgroups,
  removeAgentCgroup,
} from "../../lib/manager/sandbox/cgroup.ts";
import {
  capIpSockets,
  HOST_NET_MAX_SOCKETS,
  HOST_NET_MAX_SOCKETS_ALL,
} from "../../lib/manager/sandbox/bind_guard.ts";
import { makeDir, removeDir } from "../../lib/manager/sandbox/libc.ts";
import { resolveLimits } from "../../lib/manager/sandbox/limits.ts";
import { isCotalError } from "../../lib/errors.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";
import { sandboxedAgent } from "./_agent_fixture.ts";

const asRoot = Deno.uid() === 0;

// What a process in the group tries; one line of JSON with each outcome.
const PROBE = `
const out = {};
const attempt = async (name, fn) => {
  try { out[name] = await fn(); } catch (e) { out[name] = e.name; }
};
await attempt("bind4", () => { Deno.listen({ hostname: "127.0.0.1", port: Number(Deno.args[0]) }).close(); return "bound"; });
await attempt("bind6", () => { Deno.listen({ hostname: "::1", port: Number(Deno.args[0]) }).close(); return "bound"; });
await attempt("connect", async () => { (await Deno.connect({ hostname: "127.0.0.1", port: Number(Deno.args[1]) })).close(); return "connected"; });
await attempt("unix", () => { Deno.listen({ transport: "unix", path: Deno.args[2] }).close(); return "bound"; });
console.log(JSON.stringify(out));
`;

Deno.test({
  name:
    "bind guard - a process in a guarded group binds no IP port, yet connects out and binds unix sockets",
  ignore: !asRoot || !probeCgroups()?.guardParent,
  async fn() {
    const host = probeCgroups()!;
    const name = `cotal-bindguard-${crypto.randomUUID().slice(0, 8)}`;
    const dir = await tempDir("cotal-bindguard-");
    const outside = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    // The loopback port it may connect to (its relay's, in a real spawn): connect_guard.ts.
    const cg = createAgentCgroup(host, name, resolveLimits({}), {
      hostNet: { loopbackPorts: [(outside.addr as Deno.NetAddr).port] },
    });
    const accepting = (async () => {
      for await (const c of outside) c.close();
    })();
    const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (free.addr as Deno.NetAddr).port;
    free.close();
    try {
      const run = (guarded: boolean) =>
        new Deno.Command("/bin/sh", {
          args: [
            "-c",
            // Joins every group dir first, then becomes the probe (same pid).
            `${
              guarded ? cg.dirs.map((d) => `echo $$ > ${d}/cgroup.procs`).join(" && ") : "true"
            } && exec "$0" eval "$1" ${port} ${(outside.addr as Deno.NetAddr).port} ${dir}/${
              guarded ? "in" : "out"
            }.sock`,
            Deno.execPath(),
            PROBE,
          ],
          stdout: "piped",
          stderr: "piped",
        }).output();
      const inside = await run(true);
      const got = JSON.parse(new TextDecoder().decode(inside.stdout));
      assert.deepEqual(got, {
        bind4: "PermissionDenied",
        bind6: "PermissionDenied",
        connect: "connected",
        unix: "bound",
      }, new TextDecoder().decode(inside.stderr));
      // The same probe outside the group binds: the refusal is the guard's.
      const control = JSON.parse(new TextDecoder().decode((await run(false)).stdout));
      assert.equal(control.bind4, "bound");
    } finally {
      outside.close();
      await accepting.catch(() => {});
      await removeAgentCgroup(cg);
      await removeTempDir(dir);
    }
  },
});

Deno.test({
  name:
    "bind guard - an agent on the host's network without a group to guard it is refused, naming why",
  ignore: !asRoot,
  async fn() {
    const err = await sandboxedAgent({ kind: "module", module: "agent.ts" } as never, {
      net: "host",
      noCgroup: true,
    }).then(
      async (a) => {
        await a[Symbol.asyncDispose]();
        return undefined;
      },
      (e) => e,
    );
    assert.ok(isCotalError(err, "net_host_unguarded"), String(err));
    assert.match(err.message, /refuse it every IP bind [^]*leave out --net host/);
  },
});

Deno.test({
  name:
    "bind guard - a guarded group holds at most its cap of IP sockets at once; closed ones are given back",
  ignore: !asRoot || !probeCgroups()?.guardParent,
  async fn() {
    const parent = probeCgroups()!.guardParent!;
    const dir = `${parent}/cotal-sockcap-${crypto.randomUUID().slice(0, 8)}`;
    assert.ok(makeDir(dir));
    try {
      capIpSockets(dir, 40);
      // A shell in the group opens sockets with /dev/tcp-free means: perl's socket(2) calls.
      const script = `
        use Socket;
        my @s; my $n = 0;
        for (1..60) { socket(my $x, PF_INET, $_ % 2 ? SOCK_STREAM : SOCK_DGRAM, 0) or last; push @s, $x; $n++ }
        print "first $n ", ($! + 0), "\n";
        close($_) for splice(@s, 0, 10);
        my $m = 0;
        for (1..60) { socket(my $x, PF_INET6, SOCK_STREAM, 0) or last; push @s, $x; $m++ }
        print "again $m\n";
        socket(my $u, PF_UNIX, SOCK_STREAM, 0) and print "unix ok\n";
      `;
      const out = await new Deno.Command("/bin/sh", {
        args: ["-c", `echo $$ > ${dir}/cgroup.procs && exec /usr/bin/perl -e "$0"`, script],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stdout);
      // 40 held, refused with EPERM (1); 10 given back, 10 more; unix sockets not counted.
      assert.equal(text, "first 40 1\nagain 10\nunix ok\n", new TextDecoder().decode(out.stderr));
      assert.ok(HOST_NET_MAX_SOCKETS >= 256 && HOST_NET_MAX_SOCKETS <= 4096);
    } finally {
      for (let i = 0; i < 40 && !removeDir(dir); i++) await new Promise((r) => setTimeout(r, 50));
    }
  },
});

Deno.test({
  name:
    "bind guard - guarded groups together hold at most the shared cap of IP sockets, each within its own",
  ignore: !asRoot || !probeCgroups()?.guardParent,
  async fn() {
    const parent = probeCgroups()!.guardParent!;
    const dirs = ["a", "b"].map((n) =>
      `${parent}/cotal-sockcap-${n}-${crypto.randomUUID().slice(0, 8)}`
    );
    const holders: Deno.ChildProcess[] = [];
    try {
      for (const d of dirs) {
        assert.ok(makeDir(d));
        capIpSockets(d, 40, 60);
      }
      // Each holds what it can get, says how many, and keeps them until its stdin closes.
      const hold = (dir: string) => {
        const p = new Deno.Command("/bin/sh", {
          args: [
            "-c",
            `echo $$ > ${dir}/cgroup.procs && exec /usr/bin/perl -e "$0"`,
            'use Socket; $| = 1; my @s; for (1..100) { socket(my $x, PF_INET, SOCK_STREAM, 0) or last; push @s, $x } print scalar(@s), "\\n"; <STDIN>;',
          ],
          stdin: "piped",
          stdout: "piped",
        }).spawn();
        holders.push(p);
        return p;
      };
      const firstLine = async (p: Deno.ChildProcess) => {
        const r = p.stdout.getReader();
        const { value } = await r.read();
        r.releaseLock();
        return new TextDecoder().decode(value).trim();
      };
      assert.equal(await firstLine(hold(dirs[0])), "40", "the first group, to its own cap");
      assert.equal(
        await firstLine(hold(dirs[1])),
        "20",
        "the second, to what the shared cap leaves",
      );
      assert.ok(HOST_NET_MAX_SOCKETS_ALL >= 2 * HOST_NET_MAX_SOCKETS);
      assert.ok(HOST_NET_MAX_SOCKETS_ALL <= 28_232 / 4);
    } finally {
      for (const p of holders) {
        await p.stdin.close().catch(() => {});
        await p.stdout.cancel().catch(() => {});
        await p.status;
      }
      for (const d of dirs) {
        for (let i = 0; i < 40 && !removeDir(d); i++) await new Promise((r) => setTimeout(r, 50));
      }
    }
  },
});
