/**
 * The Landlock scope an agent's sandbox takes (`lib/manager/sandbox/landlock.ts`): where the
 * chain puts it, what it refuses in a real bwrap sandbox on the host's network, and why a host
 * cannot give it. The whole agent, dialling from `--net host`, is in
 * `tests/security/abstract_dial_test.ts`.
 */
import assert from "node:assert/strict";
import {
  LANDLOCK_SCOPE_ABI,
  landlockAbi,
  SCOPE_INTERPRETER,
  scopeChain,
  scopeUnavailable,
  scopeUnavailableWith,
} from "../../lib/manager/sandbox/landlock.ts";
import { DEFAULT_AGENT_LIMITS } from "../../lib/manager/sandbox/limits.ts";
import { bwrapArgs } from "../../lib/manager/sandbox/plan.ts";
import { testBwrap } from "./_agent_fixture.ts";

const PLAN = {
  launchDir: "/R/agents/a1",
  etcFiles: {},
  controlSocket: "/R/run/sockets/0.control",
  net: "host" as const,
  expose: [],
  code: [],
  limits: DEFAULT_AGENT_LIMITS,
  cgroupMemory: true,
  uid: 1_500_000_001,
  gid: 1_500_000_000,
  switchUser: true,
  env: { PATH: "/usr/bin" },
};

Deno.test("manager - landlock: the scope is the first program bwrap runs, before the limits and the uid drop", () => {
  const args = bwrapArgs({ ...PLAN, landlockScope: true });
  const end = args.indexOf("--chdir") + 3;
  assert.equal(args[end - 1], "--");
  assert.deepEqual(args.slice(end, end + 4), scopeChain());
  assert.equal(args[end + 4], "/usr/bin/prlimit");
  assert.ok(args.indexOf("/usr/bin/setpriv") > end + 4);
  const without = bwrapArgs(PLAN);
  assert.ok(!without.includes(SCOPE_INTERPRETER), "no scope asked, none taken");
});

Deno.test("manager - landlock: a host without scopes is named in one clause", () => {
  assert.match(scopeUnavailableWith(0, () => true)!, /no Landlock .*Linux 6\.12/);
  assert.match(scopeUnavailableWith(5, () => true)!, /ABI 5; scopes need ABI 6/);
  assert.match(scopeUnavailableWith(7, () => false)!, /\/usr\/bin\/perl is missing/);
  assert.equal(scopeUnavailableWith(LANDLOCK_SCOPE_ABI, () => true), undefined);
});

const scoped = landlockAbi() >= LANDLOCK_SCOPE_ABI && scopeUnavailable() === undefined;

Deno.test({
  name: scoped
    ? "manager - landlock: inside the scope, a host abstract socket is refused, the sandbox's own work"
    : "manager - landlock: scope test skipped, this kernel has no Landlock ABI 6",
  ignore: !scoped,
  sanitizeResources: false,
  fn: async () => {
    const bwrap = await testBwrap();
    const name = `cotal-ll-${crypto.randomUUID().slice(0, 8)}`;
    const host = new Deno.Command("/usr/bin/python3", {
      args: [
        "-c",
        `import socket,time\ns=socket.socket(socket.AF_UNIX); s.bind("\\0${name}"); s.listen(4)\n` +
        `print("up", flush=True); time.sleep(20)`,
      ],
      stdout: "piped",
    }).spawn();
    try {
      const reader = host.stdout.getReader();
      await reader.read();
      reader.releaseLock();
      const probe = [
        "import socket",
        "def dial(n):",
        "  s = socket.socket(socket.AF_UNIX)",
        "  try:",
        "    s.connect(n); return 'connected'",
        "  except OSError as e:",
        "    return e.strerror",
        `print('host:', dial("\\0${name}"))`,
        "own = socket.socket(socket.AF_UNIX); own.bind('\\0inner'); own.listen(1)",
        "print('own:', dial('\\0inner'))",
        "a, b = socket.socketpair(); a.send(b'x'); print('pair:', b.recv(1))",
      ].join("\n");
      const run = (scope: boolean) =>
        new Deno.Command(bwrap, {
          args: [
            ...["--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib"],
            ...["--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin"],
            ...["--proc", "/proc", "--dev", "/dev", "--unshare-pid", "--unshare-user"],
            ...["--disable-userns", "--cap-drop", "ALL", "--die-with-parent", "--"],
            ...(scope ? scopeChain() : []),
            ...["/usr/bin/python3", "-c", probe],
          ],
          stdout: "piped",
          stderr: "piped",
          signal: AbortSignal.timeout(30_000),
        }).output();
      const dec = new TextDecoder();
      const open = await run(false);
      assert.match(dec.decode(open.stdout), /host: connected/, dec.decode(open.stderr));
      const out = await run(true);
      const text = dec.decode(out.stdout);
      assert.equal(out.code, 0, dec.decode(out.stderr));
      assert.match(text, /host: Operation not permitted/);
      assert.match(text, /own: connected/);
      assert.match(text, /pair: b'x'/);
    } finally {
      host.kill();
      await host.status;
      await host.stdout.cancel().catch(() => {});
    }
  },
});
