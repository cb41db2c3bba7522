/**
 * Red team 40: what a sandboxed agent, on the host's network and in the default sandbox, reaches
 * across its boundary through the kernel rather than through an IP address.
 *
 * The host runs abstract unix services (`@<tag>-1` stream, `@<tag>-5` seqpacket, `@<tag>-dgram`)
 * in the stack's namespace, the agent's "host network". Each agent (`kprobe.py`) tries: connect,
 * seqpacket connect, datagram sendto, a connected datagram socket, SCM_RIGHTS passing and
 * autobind to those services, and binding the datagram's name; `kill`, `pidfd_open` +
 * `pidfd_send_signal` + `pidfd_getfd`, `ptrace` and `process_vm_readv` at pid 1 (bwrap, root,
 * outside the agent's Landlock domain); syscalls the seccomp filter does not name (`listmount`
 * of mount namespace ids 1-199, `statmount` of mount ids 1-399, `open_tree_attr`, `socketpair`
 * of vsock, packet, alg, tipc, netlink and rds); and reads `/proc/net/unix`.
 *
 * First run: under `--net host` every abstract connect and send was refused with EPERM
 * (Landlock's scope) and the host services heard nothing; `bind` refused (seccomp); autobind
 * still names the agent's socket in the host's abstract namespace (`@xxxxx`), though its send is
 * refused. In the default sandbox the same names do not exist (ECONNREFUSED: its own network
 * namespace) and binding one binds it in that namespace only. pid 1 is bwrap: `kill` EPERM, `pidfd_open` works but
 * `pidfd_send_signal` EPERM and `pidfd_getfd` EPERM, `ptrace` and `process_vm_readv` EPERM.
 * `listmount` reads the agent's own namespace only (every other id ENOENT), `statmount` answers
 * only for its own mounts' ids, `open_tree_attr` EPERM, each `socketpair` refused, `socket(vsock)`
 * EAFNOSUPPORT. Under `--net host`, `/proc/net/unix` lists the host's unix sockets (every path
 * and abstract name of the namespace): an information leak the design accepts for `--net host`.
 *
 * The test passes when no host service hears anything and none of the listed kernel calls
 * succeeds against what lies outside. About 40 s.
 */
import assert from "node:assert/strict";
import { rt40Stack, sleep, waitFor } from "./rt40_fixtures/stack.ts";

Deno.test({
  name:
    "red team 40 - a sandboxed agent reaches no host abstract socket, pid 1 or other mount namespace through the kernel",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt40Stack("kr", ["kprobe.py", "abstract_host.py"]);
    const tag = `rt40-${crypto.randomUUID().slice(0, 6)}`;
    let host: Deno.ChildProcess | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const got = `${s.work}/abstract.log`;
      host = s.spawnInNs(["/usr/bin/python3", `${s.work}/a/abstract_host.py`, tag, got]);
      await sleep(800);
      for (const [name, hostNet] of [["mhost", true], ["mown", false]] as const) {
        const m = await s.spawnAgent(name, "kprobe.py", [tag, hostNet ? "host" : "own"], hostNet);
        assert.equal(m.code, 0, m.out);
      }
      const logs: Record<string, string> = {};
      for (const mode of ["host", "own"]) {
        logs[mode] = await waitFor(`${s.work}/a/kprobe-${mode}.log`, /^done/m, 40_000);
        console.log(`--- agent, ${mode} network:\n${logs[mode].trim()}`);
      }
      await sleep(500);
      const heard = (await Deno.readTextFile(got).catch(() => "")).trim();
      console.log(`--- host abstract services:\n${heard}`);
      assert.match(heard, /listening/, "the host services ran");
      assert.deepEqual(heard.split("\n").filter((l) => l.startsWith("got")), []);
      for (const mode of ["host", "own"]) {
        const log = logs[mode];
        assert.match(log, /^done/m, `${mode}: the probe finished`);
        for (
          const bad of [
            /CONNECTED/,
            /: SENT/,
            ...(mode === "host" ? [/BOUND/] : []),
            /pidfd_send_signal\(0\) ok/,
            /pidfd_getfd returned/,
            /ptrace attach pid 1: returned/,
            /process_vm_readv pid 1: returned/,
            /listmount other namespaces 1-199: READ/,
            /open_tree_attr .*: returned/,
            /socketpair family \w+: returned/,
            /socket vsock: OPENED/,
            /kill\(1, SIGTERM\): ok/,
          ]
        ) assert.doesNotMatch(log, bad, `${mode}: ${bad}`);
      }
    } finally {
      try {
        host?.kill("SIGKILL");
        await host?.status;
      } catch {
        // Gone.
      }
      await s.close();
    }
  },
});
