/**
 * A hostile program agent, spawned through the real supervisor (pty runtime, default isolation,
 * as `cotal spawn` does), next to a sibling agent, attacks everything the sandbox exists to
 * protect: the host's root (sysctls, core_pattern, mounts, namespaces, setuid binaries), the
 * state root's seeds, another Cotal root, another project, the sibling (its terminal, its
 * process, its creds), the supervisor (its process, its control channel and relay), the host's
 * network, and the machine's resources. Each attempt is judged from the host side: the asset
 * untouched, the sibling still serving, the supervisor still answering.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { denoDir } from "../../lib/manager/start_runner.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

function marker(what: string): string {
  return `COTALMARK${what}${crypto.randomUUID().replaceAll("-", "")}`;
}

/** Free TCP ports on the host's loopback. */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

function hostAddresses(): string[] {
  return Deno.networkInterfaces().filter((i) => i.family === "IPv4" && i.address !== "127.0.0.1")
    .map((i) => i.address);
}

async function tryConnect(opts: Deno.ConnectOptions | Deno.UnixConnectOptions): Promise<string> {
  try {
    const c = await Deno.connect(opts as Deno.ConnectOptions);
    const buf = new Uint8Array(64);
    const n = await Promise.race([
      c.read(buf),
      new Promise<null>((r) => setTimeout(() => r(null), 1_000)),
    ]);
    c.close();
    return `connected: ${n ? new TextDecoder().decode(buf.subarray(0, n)) : ""}`;
  } catch (err) {
    return `refused: ${(err as Error).name}`;
  }
}

Deno.test("security - a hostile program agent reaches nothing outside its sandbox (via the supervisor)", async () => {
  await using mesh = await startManagerMesh("attacks");
  const manager = await mesh.manager({ runtime: "pty" });
  const ctl = await mesh.control();

  // Assets: the mesh's real seeds, another root's seed, another project's file, the host.
  const seeds: string[] = [];
  for await (const e of Deno.readDir(`${mesh.root}/secrets/auth`)) {
    const text = await Deno.readTextFile(`${mesh.root}/secrets/auth/${e.name}`);
    seeds.push(...(text.match(/S[OAU][A-Z2-7]{50,}/g) ?? []));
  }
  assert.ok(seeds.length >= 2, "the mesh's trust records hold seeds");
  const otherRoot = `${await tempDir("cotal-other-root-")}/.cotal`;
  const project = await tempDir("cotal-other-project-");
  const m = { other: marker("otherroot"), project: marker("project") };
  await Deno.mkdir(`${otherRoot}/secrets/auth`, { recursive: true, mode: 0o700 });
  await Deno.writeTextFile(`${otherRoot}/secrets/auth/seed.json`, m.other, { mode: 0o600 });
  await Deno.writeTextFile(`${project}/secret.txt`, m.project);
  await Deno.chmod(project, 0o755);
  await Deno.chmod(`${project}/secret.txt`, 0o644);
  const corePattern = await Deno.readTextFile("/proc/sys/kernel/core_pattern");
  const panic = await Deno.readTextFile("/proc/sys/kernel/panic");

  // A host loopback service the agent must not reach, and one it might be reached on.
  const hostPort = freePort();
  const service = Deno.listen({ hostname: "0.0.0.0", port: hostPort });
  let serviceHits = 0;
  (async () => {
    for await (const c of service) {
      serviceHits++;
      c.close();
    }
  })().catch(() => {});
  const agentPort = freePort();
  const abstract = `cotal-attack-${crypto.randomUUID().slice(0, 8)}`;

  // The sibling: a running task agent on a pty.
  const sibling = await ctl.request<AgentRow>("spawn", {
    name: "sibling",
    role: "echo",
    command: "/bin/cat",
  }, { timeoutMs: 40_000 });

  const work = await agentWorkdir("cotal-attack-work-");
  await Deno.copyFile(new URL("./_sandbox_attacks.sh", import.meta.url), `${work}/attack.sh`);
  const targets = [
    `ROOT='${mesh.root}'`,
    `OTHER_ROOT='${otherRoot}'`,
    `PROJECT='${project}'`,
    `SIBLING_PID=${sibling.pid}`,
    `SUPERVISOR_PID=${Deno.pid}`,
    `HOST_PORT=${hostPort}`,
    `HOST_IPS='${hostAddresses().join(" ")}'`,
    `BROKER_PORT=${new URL(mesh.url).port}`,
    `AGENT_PORT=${agentPort}`,
    `ABSTRACT=${abstract}`,
  ];
  await Deno.writeTextFile(`${work}/targets.sh`, targets.join("\n") + "\n");
  const attacker = await ctl.request<AgentRow>("spawn", {
    agent: "program",
    name: "attacker",
    command: "/bin/bash",
    args: ["-c", `exec /bin/bash ${work}/attack.sh ${work}/targets.sh > ${work}/out.txt 2>&1`],
    workdir: work,
    limits: { processes: 64, tmp: "8M", home: "16M", fileSize: "16M" },
  }, { timeoutMs: 40_000 });
  assert.equal(attacker.sandbox?.mode, "bwrap");
  assert.equal(attacker.sandbox?.net, "relay");

  const outFile = `${work}/out.txt`;
  await waitFor(
    () => Deno.readTextFile(outFile).then((t) => t.includes("@@end"), () => false),
    { timeoutMs: 150_000, intervalMs: 250, what: "the attacker to finish" },
  );
  const out = await Deno.readTextFile(outFile);
  // COTAL_SECURITY_REPORT=1 prints every attempt and what it got (for docs/SECURITY.md).
  if (Deno.env.get("COTAL_SECURITY_REPORT")) console.log(out);
  const attempts = new Map<string, string>();
  for (const block of out.split("@@attempt ").slice(1)) {
    const nl = block.indexOf("\n");
    attempts.set(block.slice(0, nl), block.slice(nl + 1).replace(/@@end[\s\S]*/, ""));
  }
  const got = (name: string) => {
    assert.ok(attempts.has(name), `no attempt "${name}" in:\n${out}`);
    return attempts.get(name)!;
  };

  // While it waits, listening inside: the host can reach neither listener.
  assert.match(await tryConnect({ hostname: "127.0.0.1", port: agentPort }), /^refused/);
  assert.match(
    await tryConnect({ transport: "unix", path: `\0${abstract}` } as Deno.UnixConnectOptions),
    /^refused/,
  );

  // Nothing it read holds a seed or a marker; the host's kernel settings are unchanged.
  for (const secret of [...seeds, m.other, m.project]) {
    assert.ok(!out.includes(secret), `a secret reached the agent:\n${out}`);
  }
  assert.equal(await Deno.readTextFile("/proc/sys/kernel/core_pattern"), corePattern);
  assert.equal(await Deno.readTextFile("/proc/sys/kernel/panic"), panic);
  assert.equal(serviceHits, 0, "the agent reached a host loopback service");

  // Privilege: an unprivileged uid of its own, nothing held, nothing gained.
  assert.match(got("uid"), /^uid=(\d+)\(agent\) gid=\d+\(agent\)/);
  assert.notEqual(Number(/uid=(\d+)/.exec(got("uid"))![1]), 0);
  assert.match(got("capabilities"), /CapEff:\s+0{16}/);
  assert.match(got("capabilities"), /CapBnd:\s+0{16}/);
  assert.match(got("capabilities"), /NoNewPrivs:\s+1/);
  assert.match(got("capabilities"), /Seccomp:\s+2/);
  for (const name of ["core_pattern helper", "sysctl write", "sysrq trigger"]) {
    assert.doesNotMatch(got(name), /WROTE/, name);
  }
  assert.match(got("mount a tmpfs"), /must be superuser|permission denied|not permitted/i);
  assert.match(got("new user namespace"), /Operation not permitted/);
  assert.doesNotMatch(got("new mount namespace as root of a user namespace"), /MOUNTED/);
  assert.match(got("unshare by syscall"), /rc=-1 errno=Operation not permitted/);
  assert.match(got("clone3"), /rc=-1 errno=Function not implemented/);
  assert.doesNotMatch(got("setns into pid 1"), /uid=/);
  assert.doesNotMatch(got("setuid binary su"), /uid=0/);
  assert.doesNotMatch(got("setuid binary mount"), /MOUNTED/);
  assert.match(got("chroot"), /rc=-1/);
  assert.doesNotMatch(got("ptrace pid 1"), /PATH=|HOME=/);
  for (const name of ["kernel keyring", "bpf", "perf events"]) {
    assert.match(got(name), /rc=-1 errno=Operation not permitted/, name);
  }
  assert.match(got("io_uring"), /rc=-1 errno=Function not implemented/);
  assert.match(got("kernel AIO contexts"), /rc=-1 errno=Function not implemented/);
  assert.match(got("raw packet socket"), /rc=-1 errno=Address family not supported/);
  assert.match(got("netlink usersock"), /rc=-1 errno=Address family not supported/);
  assert.match(got("netlink route"), /rc=-1 errno=Address family not supported/);
  assert.doesNotMatch(got("mknod a disk"), /MADE/);
  assert.doesNotMatch(got("devices"), /^(sda|vda|nvme\S*|mem|kmem|kmsg|port)$/m);
  assert.match(got("devices"), /cannot open .\/dev\/mem.*No such file/);
  assert.doesNotMatch(got("core dump"), /^core/m);
  // Its own devpts instance holds 16 (the host-wide pool is 4096, shared by every sandbox).
  if (attacker.sandbox?.uid !== Deno.uid()) {
    assert.match(got("every pty of the host"), /^ptys: 16$/m);
  }

  // The filesystem: none of the state root, no other root or project, no host secrets.
  assert.match(got("the state root"), /No such file or directory/);
  assert.match(got("the root's agents"), /No such file or directory/);
  assert.match(got("another Cotal root"), /No such file or directory/);
  assert.match(got("another project"), /No such file or directory/);
  assert.doesNotMatch(got("/etc/shadow and host keys"), /^(root|daemon):/m);
  assert.doesNotMatch(got("/etc/shadow and host keys"), /^shadow$/m);
  // Only the path down to the Deno install and its module cache, when they live in /root.
  const inRoot = [...got("the operator's home").matchAll(/^[d-][rwx-]{9}.* (\S+)$/gm)].map((x) =>
    x[1]
  );
  for (const name of inRoot) assert.ok([".", "..", ".cache", ".npm", ".deno"].includes(name), name);
  assert.match(got("the operator's home"), /\.bash_history: No such file/);
  assert.match(got("search everything"), /^searched$/m);
  assert.doesNotMatch(got("search everything"), /COTALMARK[a-z]+[0-9a-f]{32}/);
  for (
    const name of [
      "poison the runner's code",
      "poison the module cache",
      "rewrite its own launch file",
    ]
  ) {
    assert.doesNotMatch(got(name), /WROTE/, name);
  }
  assert.match(got("write outside its dirs"), /Read-only file system/);
  // Its own cache dir is a private tmpfs: what it wrote there is not in the host's.
  assert.match(got("a file in its own cache dir"), /^PRIVATE$/m);
  assert.equal(await Deno.stat(`${denoDir()}/cotal-poison`).then(() => true, () => false), false);
  // Of Deno's cache, only the npm registry's packages and the runner's own transpiled code, and
  // the runner's own SQLite caches in that tmpfs: no transpiled script of the operator's, no
  // code cache naming their files (red-team finding).
  const cache = got("the operator's module cache");
  assert.match(cache, /^listed$/m);
  const entries = cache.slice(0, cache.indexOf("listed")).trim().split("\n").filter((l) =>
    l !== "." && l !== ".." && l !== "cotal-poison"
  );
  assert.deepEqual(entries.filter((l) => !/^[a-z0-9_]+_cache_v\d+(-shm|-wal|-journal)?$/.test(l)), [
    "gen",
    "npm",
  ]);

  // Siblings and the supervisor: no inherited descriptor, no visible process, no terminal.
  const fds = [...got("inherited descriptors").matchAll(/ (\d+) -> (.*)/g)];
  assert.ok(fds.length >= 3, got("inherited descriptors"));
  for (const [, fd, target] of fds) {
    // Its own stdin (the pty) and out/err (the workdir file), and the shell's own listing.
    assert.ok(
      Number(fd) <= 2 || target.startsWith(`/proc/`),
      `an inherited descriptor ${fd} -> ${target}`,
    );
    assert.ok(!/ptmx|pipe:|socket:/.test(target) || Number(fd) <= 2, `${fd} -> ${target}`);
  }
  const visible = got("processes it can see").trim().split(/\s+/).map(Number);
  assert.ok(!visible.includes(Deno.pid) && !visible.includes(sibling.pid!), String(visible));
  assert.ok(visible.length < 30, `it sees ${visible.length} processes: ${visible}`);
  assert.doesNotMatch(got("signal the sibling"), /KILLED/);
  assert.doesNotMatch(got("signal the supervisor"), /STOPPED/);
  assert.match(got("type into its terminal"), /refused: Operation not permitted/);
  // The relay serves at most 16 broker connections per agent, however many it opens.
  const served = /(\d+) connected, (\d+) served/.exec(got("hold the relay open"));
  assert.ok(
    served && Number(served[2]) >= 1 && Number(served[2]) <= 16,
    got("hold the relay open"),
  );

  // The network: only the relay.
  // (bash's /dev/tcp works in there: the relay's own port answers, last below.)
  assert.match(got("a host loopback service"), /Connection refused/);
  assert.doesNotMatch(got("a host loopback service"), /CONNECTED/);
  assert.match(got("the broker's host port"), /Connection refused/);
  assert.doesNotMatch(got("the host's addresses"), /CONNECTED/);
  assert.deepEqual(got("its interfaces").trim().split(/\s+/), ["lo"]);
  // UDP buffers are a host-wide pool no cgroup charges: no UDP in its own namespace.
  assert.match(got("a UDP socket"), /refused: Operation not permitted/);
  assert.match(got("the broker through its relay"), /^INFO/m);

  // Limits: each hit inside the agent, nothing outside it.
  const bomb = /children: (\d+)/.exec(got("fork bomb"));
  assert.ok(bomb, got("fork bomb"));
  const children = Number(bomb[1]);
  assert.ok(children < 80, `the fork bomb made ${children} processes`);
  assert.match(got("fill /tmp"), /No space left on device/);
  assert.match(got("fill its home"), /No space left on device/);
  assert.match(got("fill /dev/shm"), /No space left on device/);
  assert.match(got("one huge file"), /File size limit exceeded|\b16777216\b/);
  assert.doesNotMatch(got("memory"), /ALLOCATED/);
  // Killed (the cgroup's OOM killer) or refused (RLIMIT_DATA without a cgroup).
  assert.match(got("memory"), /exit (137|1|255)|Out of memory/);

  // The sibling still serves, the supervisor still answers, and the attacker is still its own.
  const ps = await ctl.request<{ agents: AgentRow[] }>("ps");
  const sib = ps.agents.find((a) => a.name === "sibling")!;
  assert.equal(sib.status, "running");
  assert.equal(sib.restarts, 0);
  assert.ok(sib.present, "the sibling is still online");
  assert.equal(manager.status().agents, 2);
  await ctl.request("despawn", { name: "attacker" }, { timeoutMs: 30_000 });
  service.close();
  const named = [...attempts.keys()];
  assert.ok(named.length >= 50, `only ${named.length} attempts ran`);
});
