/**
 * Agent cgroups: on this kind of host (a v1 or hybrid hierarchy, the supervisor root) a real
 * group with its limits, joined by a real process, removed after; and the v2 delegation steps
 * against a stand-in tree (a kernel with delegated v2 is not on the CI machine).
 */
import assert from "node:assert/strict";
import {
  cgroupMemoryUsage,
  cgroupName,
  createAgentCgroup,
  joinAgentCgroup,
  probeCgroups,
  removeAgentCgroup,
  TCP_BUFFER_CAP,
} from "../../lib/manager/sandbox/cgroup.ts";
import { DEFAULT_AGENT_LIMITS } from "../../lib/manager/sandbox/limits.ts";
import { tempDir } from "../_harness/broker.ts";

const host = probeCgroups();

Deno.test({
  name: "cgroup - a real agent group holds its limits and its process, and goes away after" +
    (host ? "" : " (ignored: no cgroup this process may create groups in)"),
  ignore: !host,
  async fn() {
    const limits = { ...DEFAULT_AGENT_LIMITS, processes: 33, memory: 1536 * 1024 * 1024 };
    const cg = createAgentCgroup(
      host!,
      cgroupName("test agent/1", crypto.randomUUID().slice(0, 8)),
      limits,
    );
    assert.ok(cg.dirs.every((d) => /\/cotal-test_agent_1-[0-9a-f]{8}$/.test(d)), cg.dirs.join());
    const child = new Deno.Command("/bin/sleep", { args: ["30"] }).spawn();
    try {
      joinAgentCgroup(cg, child.pid);
      const memory = cg.dirs.find((d) => d.includes("memory") || host!.version === 2)!;
      const read = (f: string) => Deno.readTextFileSync(`${memory}/${f}`).trim();
      if (host!.version === 1) {
        assert.equal(read("memory.limit_in_bytes"), String(limits.memory));
        // Its TCP buffers are charged to it, not to the host-wide pool (red-team finding).
        assert.equal(read("memory.kmem.tcp.limit_in_bytes"), String(TCP_BUFFER_CAP));
        const pids = cg.dirs.find((d) => d.includes("/pids/"))!;
        assert.equal(Deno.readTextFileSync(`${pids}/pids.max`).trim(), "33");
      } else {
        assert.equal(read("memory.max"), String(limits.memory));
        assert.equal(read("pids.max"), "33");
      }
      assert.ok(read("cgroup.procs").split("\n").includes(String(child.pid)));
      assert.ok((cgroupMemoryUsage(cg) ?? -1) >= 0);
      // Busy while the process lives; removed once it is gone.
      assert.equal(await removeAgentCgroup(cg, 100), false);
    } finally {
      child.kill("SIGKILL");
      await child.status;
    }
    assert.equal(await removeAgentCgroup(cg), true);
    for (const d of cg.dirs) assert.throws(() => Deno.statSync(d), Deno.errors.NotFound);
  },
});

Deno.test("cgroup - v2: the supervisor moves to a leaf, hands memory/pids/cpu to its agents' groups", async () => {
  const fs = await tempDir("cotal-cg2-");
  const own = `${fs}/system.slice/cotal.service`;
  await Deno.mkdir(`${own}/supervisor`, { recursive: true });
  for (
    const [f, text] of Object.entries({
      "cgroup.controllers": "cpuset cpu io memory pids",
      "cgroup.subtree_control": "",
      "supervisor/cgroup.procs": "",
    })
  ) await Deno.writeTextFile(`${own}/${f}`, text);
  const found = probeCgroups({
    selfCgroup: "0::/system.slice/cotal.service\n",
    mountinfo: `30 23 0:26 / ${fs} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n`,
    pid: 4242,
  });
  assert.deepEqual(found, { version: 2, parents: { unified: own }, guardParent: own });
  assert.equal(await Deno.readTextFile(`${own}/supervisor/cgroup.procs`), "4242");
  assert.equal(await Deno.readTextFile(`${own}/cgroup.subtree_control`), "+memory +pids +cpu");
  const name = cgroupName("a1", "u1");
  await Deno.mkdir(`${own}/${name}`);
  for (const f of ["memory.max", "memory.swap.max", "pids.max", "cpu.weight", "cgroup.procs"]) {
    await Deno.writeTextFile(`${own}/${name}/${f}`, "");
  }
  const cg = createAgentCgroup(found!, name, DEFAULT_AGENT_LIMITS);
  assert.equal(await Deno.readTextFile(`${own}/${name}/memory.max`), String(1024 ** 3));
  assert.equal(await Deno.readTextFile(`${own}/${name}/memory.swap.max`), "0");
  assert.equal(await Deno.readTextFile(`${own}/${name}/pids.max`), "256");
  assert.equal(await Deno.readTextFile(`${own}/${name}/cpu.weight`), "50");
  joinAgentCgroup(cg, 777);
  assert.equal(await Deno.readTextFile(`${own}/${name}/cgroup.procs`), "777");
  // Without the memory controller there is no cgroup to use: rlimits alone, and ps says so.
  await Deno.writeTextFile(`${own}/cgroup.controllers`, "cpu io");
  assert.equal(
    probeCgroups({
      selfCgroup: "0::/system.slice/cotal.service\n",
      mountinfo: `30 23 0:26 / ${fs} rw - cgroup2 cgroup2 rw\n`,
    }),
    undefined,
  );
});
